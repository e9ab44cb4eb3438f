/**
 * The evaluate stage (seed 002_7bce204a86c1c7ba.txt step 8; issue 3 §7): on the way out, after
 * scrubbing, judges a result that would reach the client (`ok`, `tool_error`). Larger than
 * `policy.output.maxBytes` (its JSON size, never under-counted: the estimate when six times it is within the limit, else `jsonBytes`; default 16 MiB) →
 * `withheld`; any text (text blocks, embedded resource text, strings inside `structuredContent`)
 * matching one of `policy.output.deny` (regular expressions) → `withheld`. The reason names the
 * limit or the pattern's index, never the matched text.
 */
import type { CallToolResult } from '@modelcontextprotocol/server';
import { ConfigError } from '../shared/errors.js';
import { carriesResult } from './outcomes.js';
import { approximateJsonBytes, JSON_EXPANSION, jsonBytes } from './record.js';
import { splitStage, type Stage } from './runner.js';
import { refuse } from './types.js';

export interface EvaluateDeps {
  /** `policy.output.maxBytes`; read at each call (a reload may change it). */
  readonly maxBytes: number;
  /** `policy.output.deny`, as written in the config; read at each call, compiled again when it is another array. */
  readonly deny: readonly string[];
}

/** Compiles `policy.output.deny`; a bad pattern is a {@link ConfigError} naming its index. */
export function compileDenyPatterns(patterns: readonly string[]): RegExp[] {
  return patterns.map((p, i) => {
    try {
      return new RegExp(p);
    } catch (err) {
      throw new ConfigError(`policy.output.deny[${i}]`, `is not a valid regular expression: ${(err as Error).message}`);
    }
  });
}

export function evaluateStage(deps: EvaluateDeps): Stage {
  let written = deps.deny;
  let compiled = compileDenyPatterns(written);
  /** The patterns of the policy now (a config reload replaces the array; it was checked when loaded). */
  const patterns = (): RegExp[] => {
    if (deps.deny !== written) {
      compiled = compileDenyPatterns(deps.deny);
      written = deps.deny;
    }
    return compiled;
  };
  return splitStage(
    'evaluate',
    () => true,
    (call) => {
      if (!call.result || !call.outcome || !carriesResult(call.outcome)) return;
      // The estimate settles most results at once; near the limit, or past it, the exact size does.
      const maxBytes = deps.maxBytes;
      let bytes = approximateJsonBytes(call.result);
      if (bytes * JSON_EXPANSION > maxBytes) bytes = jsonBytes(call.result);
      if (bytes > maxBytes) {
        return refuse(call, 'withheld', `the result is about ${bytes} bytes, over policy.output.maxBytes (${maxBytes} bytes)`);
      }
      const deny = patterns();
      if (deny.length) {
        const hit = firstDenied(call.result, deny);
        if (hit !== undefined) return refuse(call, 'withheld', `the result matched policy.output.deny[${hit}]`);
      }
    },
  );
}

/** Index of the first pattern any text of the result matches. */
function firstDenied(result: CallToolResult, deny: readonly RegExp[]): number | undefined {
  const texts: string[] = [];
  for (const block of result.content ?? []) {
    if (block.type === 'text') texts.push(block.text);
    else if (block.type === 'resource' && 'text' in block.resource && typeof block.resource.text === 'string') texts.push(block.resource.text);
  }
  collectStrings(result.structuredContent, texts, 0);
  for (let i = 0; i < deny.length; i++) {
    for (const t of texts) if (deny[i]!.test(t)) return i;
  }
  return undefined;
}

function collectStrings(value: unknown, out: string[], depth: number): void {
  if (typeof value === 'string') out.push(value);
  else if (value && typeof value === 'object' && depth < 256) {
    for (const v of Array.isArray(value) ? value : Object.values(value)) collectStrings(v, out, depth + 1);
  }
}
