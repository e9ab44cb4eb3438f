/**
 * The JSON Schema (draft-07) of `servers.json`, generated from the zod schema, so editors
 * complete and check the file (`"$schema": "./servers.schema.json"`). `npm run schema` writes it
 * to `servers.schema.json`; a test keeps the committed file equal to this.
 *
 * It describes the file as written (zod's input side: fields with defaults are optional).
 * Placeholders are filled before validation, so string formats (`uri`) are left out: an editor
 * would flag `"url": "${env:BASE}/mcp"`.
 */
import { z } from 'zod';
import { configSchema, httpServerSchema, restServerSchema, serverSchema, sseServerSchema, stdioServerSchema } from './schema.js';

/** The JSON Schema document of `servers.json`, as a plain object. */
export function configJsonSchema(): Record<string, unknown> {
  const server = { anyOf: [stdioServerSchema, httpServerSchema, sseServerSchema, restServerSchema].map((s) => inputSchemaOf(s)) };
  const doc = z.toJSONSchema(configSchema, {
    io: 'input',
    target: 'draft-7',
    override: (ctx) => {
      const json = ctx.jsonSchema as Record<string, unknown>;
      // The server entry is validated by a transform (one schema per `type`): describe its choices.
      if (ctx.zodSchema === serverSchema) {
        for (const key of Object.keys(json)) delete json[key];
        Object.assign(json, structuredClone(server));
      }
      delete json.format;
    },
  }) as Record<string, unknown>;
  return { ...doc, title: 'mcp-broker servers.json' };
}

function inputSchemaOf(schema: z.ZodType): Record<string, unknown> {
  const json = z.toJSONSchema(schema, { io: 'input', target: 'draft-7', override: (ctx) => void delete (ctx.jsonSchema as Record<string, unknown>).format }) as Record<string, unknown>;
  delete json.$schema;
  return json;
}
