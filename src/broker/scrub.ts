/**
 * The scrub stage (seed 002_7bce204a86c1c7ba.txt step 8; issue 3 §6; case F17): on the way out,
 * before evaluate, record and publish see anything, every secret in the result becomes
 * `[REDACTED]` ({@link Scrubber}): every member of it ({@link scrubResult}), text blocks, embedded
 * resources (a base64 `blob` holding UTF-8 text too), resource links, `structuredContent`, `_meta`
 * and whatever else the upstream put there. Binary `data` and `blob` are left alone. The refusal or
 * failure reason is scrubbed too (whole, then cut), so are the JSON-RPC error a modern caller is
 * answered with (`requestError`) and the relayed `input_required` answer (`inputRequired`), and
 * so is the `message` of every progress update the call sends toward the client while it runs. A
 * result that needed no change keeps its reference, so it is never copied or re-serialised.
 *
 * When scrubbing changed `structuredContent` and the tool declares an `outputSchema`, the
 * scrubbed value is validated against it ({@link JsonSchemas}: Ajv, as the SDK's clients do):
 * one that no longer fits is `withheld`, never a result that would fail the client's validation.
 */
import type { CallToolResult } from '@modelcontextprotocol/server';
import { JsonSchemas } from '../shared/json-schemas.js';
import type { Scrubber } from '../shared/scrub.js';
import { rawJsonString } from '../wire/raw-json.js';
import { splitStage, type Stage } from './runner.js';
import { cutReason } from './failure.js';
import { carriesResult } from './outcomes.js';
import { refuse, type BrokerCall } from './types.js';

/** Checks `structuredContent` against a tool's `outputSchema`; validators are compiled once per schema. */
export { JsonSchemas as OutputSchemas };

/** What scrubbing did to a result. */
export interface ScrubbedResult {
  /** The same reference when nothing changed. */
  readonly result: CallToolResult;
  readonly structuredChanged: boolean;
}

/**
 * Scrubs every member of a result: `content` block by block ({@link scrubBlock}), `structuredContent`
 * with {@link Scrubber.value} (reported in `structuredChanged`), and every other member, `_meta`
 * or any the upstream added (a `toolResult`, a `debug` field), keys included, with
 * {@link Scrubber.value}; `isError` is left only while it is a boolean. A `content` that is not an
 * array is scrubbed as a value. Nothing an upstream puts in a result reaches the client unscrubbed,
 * whether the result is re-serialised or passed on as the bytes it arrived in (`wire/raw-json.ts`:
 * only a result this returns unchanged is).
 */
export function scrubResult(scrubber: Scrubber, result: CallToolResult): ScrubbedResult {
  const { content, structuredContent, isError, ...others } = result as CallToolResult & Record<string, unknown>;
  const scrubbedContent = Array.isArray(content) ? scrubBlocks(scrubber, content) : scrubber.value(content);
  const structured = scrubber.value(structuredContent);
  const flag = typeof isError === 'boolean' ? isError : scrubber.value(isError);
  const rest = scrubber.value(others);
  const structuredChanged = structured !== structuredContent;
  if (scrubbedContent === content && !structuredChanged && flag === isError && rest === others) return { result, structuredChanged };
  const out: Record<string, unknown> = { ...rest };
  if ('content' in result) out.content = scrubbedContent;
  if ('structuredContent' in result) out.structuredContent = structured;
  if ('isError' in result) out.isError = flag;
  return { result: out as CallToolResult, structuredChanged };
}

/** The blocks scrubbed; the same array when nothing changed. */
function scrubBlocks(scrubber: Scrubber, content: unknown[]): unknown[] {
  let copy: unknown[] | undefined;
  for (let i = 0; i < content.length; i++) {
    const block = content[i];
    const next = scrubBlock(scrubber, block);
    if (next !== block) (copy ??= content.slice())[i] = next;
  }
  return copy ?? content;
}

/**
 * A text block: its `text` and every other field. Any other block with {@link Scrubber.media}:
 * an embedded resource's `blob` decoded and scrubbed when it holds UTF-8 text (as `resources/read`
 * is), the base64 `data` of an image or audio block left as it is, every other string scrubbed.
 * Something that is not a block at all (a bare string) is scrubbed as a value.
 */
function scrubBlock(scrubber: Scrubber, block: unknown): unknown {
  if (typeof block !== 'object' || block === null || Array.isArray(block)) return scrubber.value(block);
  const typed = block as { type?: unknown; text?: unknown };
  // A large text still in its bytes (wire/raw-json.ts) told clean from them is never decoded.
  const raw = typed.type === 'text' ? rawJsonString(block, 'text') : undefined;
  if (raw && scrubber.leavesJsonString(raw.bytes, raw.escaped)) return scrubOthers(scrubber, block, ['type', 'text']);
  if (typed.type === 'text' && typeof typed.text === 'string') {
    const text = scrubber.text(typed.text);
    const rest = scrubOthers(scrubber, block, ['type', 'text']);
    return text === typed.text && rest === block ? block : { ...rest, text };
  }
  return scrubber.media(block);
}

/**
 * Scrubs every member of `obj` but `keep` as {@link Scrubber.value} scrubs an object's members:
 * keys included, credential-named fields redacted. The same reference when nothing changed; else
 * the kept members, then the scrubbed others.
 */
function scrubOthers<T extends object>(scrubber: Scrubber, obj: T, keep: readonly string[]): T {
  const source = obj as Record<string, unknown>;
  let others: Record<string, unknown> | undefined;
  for (const key of Object.keys(source)) if (!keep.includes(key)) (others ??= {})[key] = source[key];
  if (others === undefined) return obj;
  const clean = scrubber.value(others);
  if (clean === others) return obj;
  const out: Record<string, unknown> = {};
  for (const key of keep) if (Object.hasOwn(source, key)) out[key] = source[key];
  return Object.assign(out, clean) as T;
}

/**
 * The JSON-RPC error a modern caller is answered with instead of a result (an upstream's -32021
 * passed on, `router/router.ts`): its `message` and `data` scrubbed, the code kept.
 */
function scrubRequestError(scrubber: Scrubber, error: NonNullable<BrokerCall['requestError']>): NonNullable<BrokerCall['requestError']> {
  const message = scrubber.text(error.message);
  const data = scrubber.value(error.data);
  return message === error.message && data === error.data ? error : { code: error.code, message, ...(data !== undefined && { data }) };
}

/** Schemas an input request's params carry: their strings scrubbed, their property names kept. */
const SCHEMA_PARAMS = new Set(['requestedSchema', 'inputSchema', 'outputSchema']);

/** {@link scrubInputRequired}'s input requests: keys through the text scrubber, each request's schemas as strings and the rest as values. */
function scrubInputRequests(scrubber: Scrubber, requests: unknown): unknown {
  if (typeof requests !== 'object' || requests === null || Array.isArray(requests)) return scrubber.strings(requests);
  let out: Record<string, unknown> | undefined;
  for (const [key, request] of Object.entries(requests as Record<string, unknown>)) {
    const cleanKey = scrubber.text(key);
    const next = scrubInputRequest(scrubber, request);
    if (cleanKey !== key || next !== request) {
      out ??= { ...(requests as Record<string, unknown>) };
      delete out[key];
      out[cleanKey] = next;
    }
  }
  return out ?? requests;
}

function scrubInputRequest(scrubber: Scrubber, request: unknown): unknown {
  if (typeof request !== 'object' || request === null || Array.isArray(request)) return scrubber.strings(request);
  const { params, ...rest } = request as Record<string, unknown>;
  let scrubbedParams = params;
  if (typeof params === 'object' && params !== null && !Array.isArray(params)) {
    // The schemas as strings (their property names kept); every other param as a value, its key
    // through the text scrubber and a credential-named one's value redacted.
    const schemas: Record<string, unknown> = {};
    const others: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(params)) (SCHEMA_PARAMS.has(key) ? schemas : others)[key] = value;
    const cleanSchemas = scrubber.strings(schemas);
    const cleanOthers = scrubber.media(others);
    const changed = Object.keys(schemas).some((k) => cleanSchemas[k] !== schemas[k]) || cleanOthers !== others;
    scrubbedParams = changed ? { ...cleanOthers, ...cleanSchemas } : params;
  } else if (params !== undefined) scrubbedParams = scrubber.strings(params);
  const scrubbedRest = scrubber.value(rest);
  if (scrubbedParams === params && scrubbedRest === rest) return request;
  return { ...scrubbedRest, ...(params !== undefined && { params: scrubbedParams }) };
}

/**
 * The `input_required` answer relayed to a modern caller (`relay-input.ts`): each input request
 * scrubbed as a relayed server request is (`upstream-scrub.ts` `serverRequest`): the schemas in
 * its params kept ({@link Scrubber.strings}: a `password` property of a `requestedSchema` names a
 * field, it is no secret), every other member of it a value (credential-named fields redacted,
 * text blobs decoded), its keys too; every other member of the answer (`_meta`, any the upstream
 * added) as a value; the sealed `requestState` is the broker's own and left as it is.
 */
function scrubInputRequired(scrubber: Scrubber, answer: NonNullable<BrokerCall['inputRequired']>): NonNullable<BrokerCall['inputRequired']> {
  const { inputRequests, requestState, resultType, ...others } = answer as unknown as Record<string, unknown>;
  const requests = scrubInputRequests(scrubber, inputRequests);
  const rest = scrubber.value(others);
  if (requests === inputRequests && rest === others) return answer;
  return { ...rest, resultType, inputRequests: requests, ...(requestState !== undefined && { requestState }) } as unknown as NonNullable<BrokerCall['inputRequired']>;
}

export interface ScrubDeps {
  scrubber: Scrubber;
  schemas?: JsonSchemas;
}

export function scrubStage(deps: ScrubDeps): Stage {
  const schemas = deps.schemas ?? new JsonSchemas();
  return splitStage(
    'scrub',
    (call) => {
      // Progress goes toward the client while the call runs, from any lane: its message is scrubbed on the way.
      const forward = call.onProgress;
      if (forward) call.onProgress = (update) => forward(update.message === undefined ? update : { ...update, message: deps.scrubber.text(update.message) });
      return true;
    },
    (call) => {
      // Scrubbed whole, then cut: a cut through a secret would leave the part before it unrecognised.
      if (call.reason !== undefined) call.reason = cutReason(deps.scrubber.text(call.reason));
      if (call.requestError !== undefined) call.requestError = scrubRequestError(deps.scrubber, call.requestError);
      if (call.inputRequired !== undefined) call.inputRequired = scrubInputRequired(deps.scrubber, call.inputRequired);
      if (!call.result || !call.outcome || !carriesResult(call.outcome)) return;
      const { result, structuredChanged } = scrubResult(deps.scrubber, call.result);
      call.result = result;
      const schema = call.target?.definition?.outputSchema;
      if (structuredChanged && schema && result.isError !== true) {
        const misfit = schemas.check(schema, result.structuredContent);
        if (misfit !== undefined) {
          // Scrubbed whole, then cut, as every reason: the misfit names the schema's parts (a remote `$ref` whole).
          const why = `secrets were redacted from structuredContent and it no longer fits the tool's outputSchema (${misfit})`;
          refuse(call, 'withheld', cutReason(deps.scrubber.text(why)));
        }
      }
    },
  );
}
