/**
 * JSON Schema checks with the SDK's own Ajv provider (`AjvJsonSchemaValidator`: all errors,
 * formats checked, unknown keywords ignored). Used for a tool's `outputSchema` (scrub stage) and
 * a rest tool's `inputSchema`. Each schema object is compiled once and kept while it lives.
 *
 * - **Dialect**: JSON Schema 2020-12 unless the schema declares another in `$schema`, as the
 *   2025-11-25 and 2026-07-28 revisions say. The provider dispatches on `$schema`: none or
 *   2020-12 → `Ajv2020`, 2019-09 → `Ajv2019`, draft-07 or draft-06 → the draft-07 engine; any
 *   other `$schema` does not compile.
 * - **No network**: a `$ref` (or `$dynamicRef`) is resolved inside the schema only: one starting
 *   with `#`, or whose document part names an `$id` the schema declares. Any other is a compile
 *   error naming it ("remote references are never fetched"); nothing is ever fetched.
 * - **Depth**: a schema nested deeper than {@link MAX_SCHEMA_DEPTH} levels (objects and arrays,
 *   so `allOf`/`anyOf`/`properties` chains all count) does not compile, before Ajv recurses.
 * - **`$id`**: the provider keeps schemas by `$id` in one engine, so two tools declaring the same
 *   `$id` would share the first one's validator; a schema with an `$id` gets a provider of its own.
 *
 * The reasons are Ajv's `errorsText`: instance paths and rules (`data/qty must be integer`),
 * never the values checked; a refused reference is named whole. They are not cut: a caller
 * scrubs a reason, then cuts it.
 */
import type { JsonSchemaType, JsonSchemaValidator } from '@modelcontextprotocol/server';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/server/validators/ajv';
import { messageOf } from './errors.js';

/** Deepest nesting of a schema document that compiles, in levels of JSON objects and arrays. */
export const MAX_SCHEMA_DEPTH = 64;

/** Compiles JSON Schemas once per schema object and checks values against them. */
export class JsonSchemas {
  private readonly provider = new AjvJsonSchemaValidator();
  private readonly compiled = new WeakMap<object, JsonSchemaValidator<unknown> | Error>();

  /** Why `schema` does not compile, or `undefined` when it does. */
  compileError(schema: object): string | undefined {
    const validator = this.validator(schema);
    return validator instanceof Error ? validator.message : undefined;
  }

  /** `undefined` when `value` fits `schema`, else why not (a schema that cannot compile never fits). */
  check(schema: object, value: unknown): string | undefined {
    const validator = this.validator(schema);
    if (validator instanceof Error) return validator.message;
    const result = validator(value);
    return result.valid ? undefined : result.errorMessage;
  }

  private validator(schema: object): JsonSchemaValidator<unknown> | Error {
    let validator = this.compiled.get(schema);
    if (!validator) {
      try {
        const problem = schemaProblem(schema);
        if (problem) throw new Error(problem);
        const provider = typeof (schema as { $id?: unknown }).$id === 'string' ? new AjvJsonSchemaValidator() : this.provider;
        validator = provider.getValidator(schema as JsonSchemaType);
      } catch (err) {
        validator = new Error(`the schema does not compile: ${messageOf(err)}`);
      }
      this.compiled.set(schema, validator);
    }
    return validator;
  }
}

/** Why `schema` is refused before Ajv sees it (too deep, a reference outside it), or `undefined`. */
function schemaProblem(schema: object): string | undefined {
  const ids = new Set<string>();
  const refs: { ref: string; path: string }[] = [];
  const walk = (value: unknown, depth: number, path: string): string | undefined => {
    if (value === null || typeof value !== 'object') return undefined;
    if (depth > MAX_SCHEMA_DEPTH) return `it is nested deeper than ${MAX_SCHEMA_DEPTH} levels (at ${path || '/'})`;
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) {
        const why = walk(value[i], depth + 1, `${path}/${i}`);
        if (why) return why;
      }
      return undefined;
    }
    for (const [key, child] of Object.entries(value)) {
      if (typeof child === 'string') {
        if (key === '$id') ids.add(withoutFragment(child));
        else if (key === '$ref' || key === '$dynamicRef') refs.push({ ref: child, path: `${path}/${key}` });
      } else {
        const why = walk(child, depth + 1, `${path}/${key}`);
        if (why) return why;
      }
    }
    return undefined;
  };
  const tooDeep = walk(schema, 1, '');
  if (tooDeep) return tooDeep;
  for (const { ref, path } of refs) {
    if (ref.startsWith('#') || ids.has(withoutFragment(ref))) continue;
    // Whole: a cut through a secret in it would leave its first characters unrecognised; whoever
    // shows the message scrubs it, then cuts it (the scrub stage's `withheld` reason, a call's reason).
    return `the reference ${JSON.stringify(ref)} at ${path} is not inside the schema; remote references are never fetched`;
  }
  return undefined;
}

function withoutFragment(uri: string): string {
  const hash = uri.indexOf('#');
  return hash < 0 ? uri : uri.slice(0, hash);
}
