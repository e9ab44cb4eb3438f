/**
 * A handler's own verdict on the call it answered (seed 000_13a5a3abd08ace07.txt,
 * `handlerFailure`; issue 3 §10). Read off the body, never off the promise.
 */
import type { CallToolResult } from '@modelcontextprotocol/server';

/**
 * The failure a result reports, or `null` when it reports none: `isError: true`, or a
 * top-level `success: false` in `structuredContent` or in a text block that parses as a JSON
 * object. Only an explicit boolean `false` counts; a `success` nested in arrays or items is
 * that item's verdict, not the call's.
 */
export function handlerFailure(result: CallToolResult): string | null {
  if (result.isError === true) return firstText(result) ?? 'the tool reported an error';
  const structured = result.structuredContent;
  if (isFailureObject(structured)) return messageIn(structured) ?? 'the tool reported success: false';
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
