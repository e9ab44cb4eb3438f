/**
 * A handler's own verdict on the call it answered (seed 000_13a5a3abd08ace07.txt,
 * `handlerFailure`; issue 3 §10). Read off the handler's reply, never off the promise, and never
 * off data the handler returns: a file read, a fetched page or a query's rows may well hold a
 * top-level `success: false` of their own.
 */
import type { CallToolResult } from '@modelcontextprotocol/server';

export interface VerdictOptions {
  /**
   * Also read the verdict from any text block that parses as a JSON object with a
   * top-level `success: false` (for servers whose replies are JSON text, such as seed 000's
   * bridge handlers): `mcpServers.<key>.verdictFromText` or its per-tool override. Default
   * `false`: text blocks are data.
   */
  fromText?: boolean;
}

/**
 * The failure a result reports, or `null` when it reports none: `isError: true`, or a top-level
 * `success: false` in `structuredContent` (a REST upstream's JSON body and a function tool's
 * returned object arrive there), or, with {@link VerdictOptions.fromText}, in a text block that
 * parses as a JSON object. Only an explicit boolean `false` counts; a `success` nested in arrays
 * or items is that item's verdict, not the call's. The message is the failure's `error`,
 * `message` or `reason` text (or the first text block of an `isError` result).
 */
export function handlerFailure(result: CallToolResult, options: VerdictOptions = {}): string | null {
  if (result.isError === true) return firstText(result) ?? 'the tool reported an error';
  const structured = result.structuredContent;
  if (isFailureObject(structured)) return messageIn(structured) ?? 'the tool reported success: false';
  if (!options.fromText) return null;
  for (const block of result.content ?? []) {
    if (block.type !== 'text') continue;
    const text = block.text.trimStart();
    if (!text.startsWith('{') || !text.includes('"success"')) continue;
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      continue;
    }
    if (isFailureObject(parsed)) return messageIn(parsed) ?? 'the tool reported success: false';
  }
  return null;
}

function isFailureObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && (value as Record<string, unknown>).success === false;
}

function messageIn(obj: Record<string, unknown>): string | undefined {
  for (const key of ['error', 'message', 'reason']) {
    const v = obj[key];
    if (typeof v === 'string' && v) return v;
  }
  return undefined;
}

function firstText(result: CallToolResult): string | undefined {
  for (const block of result.content ?? []) if (block.type === 'text' && block.text) return block.text;
  return undefined;
}
