/**
 * Whether a call's arguments can be sent at all: checked by the invoke stage before anything is
 * sent, so arguments no serialiser can write are the caller's `invalid_arguments` (400), never an
 * upstream's fault (they would otherwise fail inside the transport as a `RangeError` and be
 * counted against the tool's breaker).
 *
 * Arguments arrive parsed from JSON (any depth parses) or as objects from function-tool and flow
 * callers (cycles and BigInts are possible there).
 */

/**
 * Deepest nesting of a call's arguments, in levels: the `arguments` object itself is level 1,
 * each object or array inside it one more. Deeper arguments are `invalid_arguments`.
 */
export const MAX_ARGUMENT_DEPTH = 64;

/**
 * Why `args` cannot be sent, as one line naming no value, or `undefined` when they can: nested
 * deeper than {@link MAX_ARGUMENT_DEPTH} levels, a cycle, a BigInt (which JSON cannot carry), or
 * a value that throws when read. Walks every value once; never throws.
 */
export function argumentsProblem(args: unknown): string | undefined {
  const ancestors: object[] = [];
  const walk = (value: unknown): string | undefined => {
    if (typeof value === 'bigint') return 'hold a BigInt, which JSON cannot carry';
    if (typeof value !== 'object' || value === null) return undefined;
    if (ancestors.includes(value)) return 'hold a cycle (a value that contains itself)';
    if (ancestors.length >= MAX_ARGUMENT_DEPTH) return `are nested deeper than ${MAX_ARGUMENT_DEPTH} levels`;
    ancestors.push(value);
    let problem: string | undefined;
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length && problem === undefined; i++) problem = walk(value[i]);
    } else {
      for (const key in value) {
        if (!Object.prototype.hasOwnProperty.call(value, key)) continue;
        problem = walk((value as Record<string, unknown>)[key]);
        if (problem !== undefined) break;
      }
    }
    ancestors.pop();
    return problem;
  };
  try {
    return walk(args);
  } catch {
    return 'cannot be read (a getter or proxy threw)';
  }
}
