/**
 * The scrub stage (seed 002_7bce204a86c1c7ba.txt step 8; issue 3 §6; case F17): on the way out,
 * before evaluate, record and publish see anything, every secret in the result becomes
 * `[REDACTED]` ({@link Scrubber}): text blocks, embedded resource text, resource links,
 * `structuredContent` and `_meta`. Binary `data` and `blob` are left alone. The refusal or
 * failure reason is scrubbed too, and so is the `message` of every progress update the call sends
 * toward the client while it runs. A result that needed no change keeps its reference, so it is
 * never copied or re-serialised.
 *
 * When scrubbing changed `structuredContent` and the tool declares an `outputSchema`, the
 * scrubbed value is validated against it ({@link JsonSchemas}: Ajv, as the SDK's clients do):
 * one that no longer fits is `withheld`, never a result that would fail the client's validation.
 */
import type { CallToolResult } from '@modelcontextprotocol/server';
import { JsonSchemas } from '../shared/json-schemas.js';
import type { Scrubber } from '../shared/scrub.js';
import { splitStage, type Stage } from './runner.js';
import { carriesResult } from './outcomes.js';
import { refuse } from './types.js';

/** Checks `structuredContent` against a tool's `outputSchema`; validators are compiled once per schema. */
export { JsonSchemas as OutputSchemas };

/** What scrubbing did to a result. */
export interface ScrubbedResult {
  /** The same reference when nothing changed. */
  readonly result: CallToolResult;
  readonly structuredChanged: boolean;
}

/** Scrubs the parts of a result that can carry text; leaves binary data untouched. */
export function scrubResult(scrubber: Scrubber, result: CallToolResult): ScrubbedResult {
  let content = result.content;
  if (Array.isArray(content)) {
    let copy: typeof content | undefined;
    for (let i = 0; i < content.length; i++) {
      const block = content[i]!;
      const next = scrubBlock(scrubber, block);
      if (next !== block) (copy ??= content.slice())[i] = next;
    }
    content = copy ?? content;
  }
  const structured = result.structuredContent === undefined ? undefined : scrubber.value(result.structuredContent);
  const meta = result._meta === undefined ? undefined : scrubber.value(result._meta);
  const structuredChanged = structured !== result.structuredContent;
  if (content === result.content && !structuredChanged && meta === result._meta) return { result, structuredChanged };
  const out: CallToolResult = { ...result, content };
  if (structuredChanged) out.structuredContent = structured;
  if (meta !== result._meta) out._meta = meta;
  return { result: out, structuredChanged };
}

type Block = CallToolResult['content'][number];

function scrubBlock(scrubber: Scrubber, block: Block): Block {
  if (block.type === 'text') {
    const text = scrubber.text(block.text);
    const rest = scrubOthers(scrubber, block, ['type', 'text']);
    return text === block.text && rest === block ? block : ({ ...rest, text } as Block);
  }
  if (block.type === 'resource') {
    const resource = block.resource as Record<string, unknown>;
    const inner = scrubOthers(scrubber, resource, ['blob']);
    const outer = scrubOthers(scrubber, block, ['type', 'resource']);
    return inner === resource && outer === block ? block : ({ ...outer, resource: inner } as Block);
  }
  // image, audio (binary `data`), resource_link, and block types this build does not know.
  return scrubOthers(scrubber, block, ['type', 'data', 'blob']);
}

/** Scrubs every field of `obj` except `keep`; the same reference when nothing changed. */
function scrubOthers<T extends object>(scrubber: Scrubber, obj: T, keep: readonly string[]): T {
  let out: Record<string, unknown> | undefined;
  for (const key of Object.keys(obj)) {
    if (keep.includes(key)) continue;
    const value = (obj as Record<string, unknown>)[key];
    const next = scrubber.value(value);
    if (next !== value) (out ??= { ...(obj as Record<string, unknown>) })[key] = next;
  }
  return (out as T | undefined) ?? obj;
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
      if (call.reason !== undefined) call.reason = deps.scrubber.text(call.reason);
      if (!call.result || !call.outcome || !carriesResult(call.outcome)) return;
      const { result, structuredChanged } = scrubResult(deps.scrubber, call.result);
      call.result = result;
      const schema = call.target?.definition?.outputSchema;
      if (structuredChanged && schema && result.isError !== true) {
        const misfit = schemas.check(schema, result.structuredContent);
        if (misfit !== undefined) {
          refuse(call, 'withheld', `secrets were redacted from structuredContent and it no longer fits the tool's outputSchema (${deps.scrubber.text(misfit)})`);
        }
      }
    },
  );
}
