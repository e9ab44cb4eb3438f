/**
 * The scrubber at the upstream boundary: everything an upstream sends toward a downstream
 * client outside a `tools/call` result and its progress (the broker's scrub stage owns those,
 * `broker/scrub.ts`) passes here first,
 * so a secret injected into an upstream (its `env`, `headers`, `${env:…}` values) never reaches
 * a client through a list, a log message or a reply:
 *
 *  - catalogs, as lists are built: tools (name, title, description, annotations, `_meta`, and
 *    every string of `inputSchema` and `outputSchema`, where field names confer no secrecy:
 *    {@link Scrubber.strings}), prompts, resources and resource templates ({@link Scrubber.value});
 *  - `notifications/message`: `logger` and `data`;
 *  - replies to `prompts/get`, `resources/read` and `completion/complete`
 *    ({@link Scrubber.media}: UTF-8 text blobs are scrubbed, binary image/audio data left alone);
 *  - failures of those requests: message and data of the JSON-RPC error;
 *  - requests an upstream sends to the client during a call (`elicitation/create`,
 *    `sampling/createMessage`, `roots/list`): their params, an elicitation's `requestedSchema`
 *    by {@link Scrubber.strings} (a field called `password` is what it asks for, not a secret).
 *
 * An item whose name or URI held a secret is served under the redacted one, so it can no longer
 * be called or read by it (fail closed).
 */
import { ProtocolError, ProtocolErrorCode, type Prompt, type Resource, type ResourceTemplateType, type Tool } from '@modelcontextprotocol/client';
import { BrokerError, joinLines, messageOf } from '../shared/errors.js';
import { legacyCodeOf } from '../shared/sdk-errors.js';
import type { Scrubber } from '../shared/scrub.js';
import type { UpstreamCatalog } from './types.js';

/** The fields of a tool definition that are JSON Schemas: their strings are scrubbed without the field-name rule. */
const SCHEMA_FIELDS = new Set(['inputSchema', 'outputSchema']);

/** An upstream `notifications/message` as relayed. */
export interface LogParams {
  level: string;
  logger?: string;
  data?: unknown;
}

export class UpstreamScrub {
  /**
   * Scrubbed copy of each catalog list, by the list's identity (an upstream replaces a list when
   * it changes), with the scrubber's {@link Scrubber.generation} it was scrubbed at: a secret
   * added since scrubs it anew.
   */
  private readonly lists = new WeakMap<readonly object[], { readonly generation: number; readonly items: readonly object[] }>();

  constructor(readonly scrubber: Scrubber) {}

  /** A catalog with every list scrubbed; lists that needed no change are the same arrays. */
  catalog(catalog: UpstreamCatalog): UpstreamCatalog {
    return {
      tools: this.list(catalog.tools, (t) => this.tool(t)),
      prompts: this.list(catalog.prompts, (p) => this.scrubber.value<Prompt>(p)),
      resources: this.list(catalog.resources, (r) => this.scrubber.value<Resource>(r)),
      resourceTemplates: this.list(catalog.resourceTemplates, (t) => this.scrubber.value<ResourceTemplateType>(t)),
    };
  }

  /** A tool definition with its secrets redacted; the same reference when none. */
  tool(tool: Tool): Tool {
    let out: Record<string, unknown> | undefined;
    for (const [key, value] of Object.entries(tool)) {
      const next = SCHEMA_FIELDS.has(key) ? this.scrubber.strings(value) : this.scrubber.value(value);
      if (next !== value) (out ??= { ...tool })[key] = next;
    }
    return (out as Tool | undefined) ?? tool;
  }

  /** A relayed log message with `logger` and `data` scrubbed; the same reference when nothing changed. */
  log<T extends LogParams>(params: T): T {
    const logger = params.logger === undefined ? undefined : this.scrubber.text(params.logger);
    const data = this.scrubber.value(params.data);
    return logger === params.logger && data === params.data ? params : { ...params, logger, data };
  }

  /** The params of a request an upstream sends toward the client (elicitation, sampling, roots), scrubbed. */
  serverRequest<T extends Record<string, unknown> | undefined>(params: T): T {
    if (params === undefined) return params;
    let out: Record<string, unknown> | undefined;
    for (const [key, value] of Object.entries(params)) {
      const next = key === 'requestedSchema' ? this.scrubber.strings(value) : this.scrubber.media(value);
      if (next !== value) (out ??= { ...params })[key] = next;
    }
    return (out as T | undefined) ?? params;
  }

  /** A reply to `prompts/get`, `resources/read` or `completion/complete`, scrubbed. */
  reply<T>(result: T): T {
    return this.scrubber.media(result);
  }

  /**
   * The failure of such a request as the client is to see it: the upstream's own JSON-RPC error
   * (`ProtocolError`) keeps its code, with message (as it came) and data scrubbed; the SDK's own
   * timeout or closed connection keeps the code SDK v1 gave it (-32001, -32000; `legacyCodeOf`)
   * with its scrubbed message; a broker error or anything else is -32603 with a scrubbed one-line
   * message naming the upstream.
   */
  error(err: unknown, server: string): ProtocolError {
    if (ProtocolError.isInstance(err)) {
      return new ProtocolError(err.code, this.scrubber.text(err.message), err.data === undefined ? undefined : this.scrubber.value(err.data));
    }
    const message = joinLines(this.scrubber.text(messageOf(err)));
    const legacy = legacyCodeOf(err);
    if (legacy !== undefined) return new ProtocolError(legacy, message);
    return new ProtocolError(ProtocolErrorCode.InternalError, err instanceof BrokerError ? message : `upstream "${server}": ${message}`);
  }

  private list<T extends object>(items: readonly T[], scrub: (item: T) => T): T[] {
    const known = this.lists.get(items);
    if (known && known.generation === this.scrubber.generation) return known.items as T[];
    let out: T[] | undefined;
    for (let i = 0; i < items.length; i++) {
      const next = scrub(items[i]!);
      if (next !== items[i]) (out ??= items.slice())[i] = next;
    }
    const scrubbed = out ?? (items as T[]);
    this.lists.set(items, { generation: this.scrubber.generation, items: scrubbed });
    return scrubbed;
  }
}
