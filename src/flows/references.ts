/**
 * `${steps.<id>.result…}` references in a flow step's arguments: the result of an earlier step,
 * read when the step runs.
 *
 * `result` is the step's `structuredContent` when it has one; else, for a result whose text is
 * one JSON value, that value; else its text blocks joined by newlines. A path follows it:
 * `.name` for an object member, `[0]` for an array element (`${steps.create.result.items[0].id}`).
 * A string that is exactly one reference is replaced by the value itself (any JSON type); a
 * reference inside a longer string is replaced by the value's text (a string as is, anything
 * else as JSON). Only steps that already ran can be named; anything else is a
 * {@link ReferenceError}, and the step is not sent.
 */
import type { CallToolResult } from '@modelcontextprotocol/server';

const WHOLE = /^\$\{(steps\.[^}]+)\}$/;
const ANY = /\$\{(steps\.[^}]+)\}/g;

/** A reference that cannot be read: unknown step, a path the value does not have. */
export class FlowReferenceError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'FlowReferenceError';
  }
}

/** What a step's `result` is, for references (see the module comment). */
export function resultValue(result: CallToolResult | undefined): unknown {
  if (!result) return undefined;
  if (result.structuredContent !== undefined) return result.structuredContent;
  const texts = (result.content ?? []).filter((b) => b.type === 'text').map((b) => (b as { text: string }).text);
  if (texts.length === 1) {
    try {
      return JSON.parse(texts[0]!);
    } catch {
      return texts[0];
    }
  }
  return texts.join('\n');
}

/** `value` with every reference replaced from `results` (step id → result value); throws {@link FlowReferenceError}. */
export function resolveReferences(value: unknown, results: ReadonlyMap<string, unknown>, depth = 0): unknown {
  if (depth > 64) return value;
  if (typeof value === 'string') {
    const whole = WHOLE.exec(value);
    if (whole) return read(whole[1]!, results);
    if (!value.includes('${steps.')) return value;
    return value.replace(ANY, (_m, ref: string) => {
      const v = read(ref, results);
      return typeof v === 'string' ? v : JSON.stringify(v);
    });
  }
  if (Array.isArray(value)) return value.map((v) => resolveReferences(v, results, depth + 1));
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = resolveReferences(v, results, depth + 1);
    return out;
  }
  return value;
}

function read(ref: string, results: ReadonlyMap<string, unknown>): unknown {
  // steps.<id>.result<path>
  const m = /^steps\.([^.[\]]+)\.result(.*)$/.exec(ref);
  if (!m) throw new FlowReferenceError(`\${${ref}} is not of the form \${steps.<id>.result…}`);
  const [, id, path] = m as unknown as [string, string, string];
  if (!results.has(id)) throw new FlowReferenceError(`\${${ref}} names step "${id}", which did not run before this one, or did not end ok`);
  let current: unknown = results.get(id);
  const parts = path.match(/\.[^.[\]]+|\[\d+\]/g) ?? [];
  if (parts.join('') !== path) throw new FlowReferenceError(`\${${ref}}: cannot read the path "${path}"`);
  for (const part of parts) {
    const key = part.startsWith('[') ? Number(part.slice(1, -1)) : part.slice(1);
    // Own members only: `constructor`, `__proto__` and the rest of the prototype chain are no part of a result.
    if (current === null || typeof current !== 'object' || !Object.hasOwn(current, key)) {
      throw new FlowReferenceError(`\${${ref}}: the result of step "${id}" has no ${part}`);
    }
    current = (current as Record<string | number, unknown>)[key];
  }
  return current;
}
