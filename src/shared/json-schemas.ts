/**
 * JSON Schema checks with the SDK's own Ajv setup (`AjvJsonSchemaValidator`: all errors,
 * formats checked, unknown keywords ignored). Used for a tool's `outputSchema` (scrub stage) and
 * a rest tool's `inputSchema` (issue 7). Each schema object is compiled once and kept while it
 * lives.
 *
 * The dialect is draft-07 for every schema, as with SDK v1's default engine: SDK v2's default
 * provider dispatches on `$schema` (2020-12 when absent), so it is handed the draft-07 `Ajv`
 * built the way the SDK documents as the v1 equivalent.
 *
 * The reasons are Ajv's `errorsText`: instance paths and rules (`data/qty must be integer`),
 * never the values checked.
 */
import type { JsonSchemaType, JsonSchemaValidator } from '@modelcontextprotocol/server';
import { Ajv, AjvJsonSchemaValidator, addFormats } from '@modelcontextprotocol/server/validators/ajv';
import { messageOf } from './errors.js';

/** Compiles JSON Schemas once per schema object and checks values against them. */
export class JsonSchemas {
  private readonly provider = new AjvJsonSchemaValidator(draft07());
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
        validator = this.provider.getValidator(schema as JsonSchemaType);
      } catch (err) {
        validator = new Error(`the schema does not compile: ${messageOf(err)}`);
      }
      this.compiled.set(schema, validator);
    }
    return validator;
  }
}

/** SDK v1's default engine: draft-07 Ajv, all errors, formats checked, schemas not meta-validated, unknown keywords ignored. */
function draft07(): InstanceType<typeof Ajv> {
  const ajv = new Ajv({ strict: false, validateFormats: true, validateSchema: false, allErrors: true });
  addFormats(ajv);
  return ajv;
}
