/**
 * The JSON Schema shipped for servers.json (issue 18 §2): generated from the zod schema, never
 * drifting from it, and named by the bundled servers.json so editors complete and check it.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { configJsonSchema } from '../../src/config/json-schema.js';
import { loadConfigFile } from '../../src/config/load.js';
import { STDIO_SERVER_FIELDS } from '../../src/config/constants.js';
import { ROOT } from '../e2e/helpers.js';

const committed = () => readFileSync(join(ROOT, 'servers.schema.json'), 'utf8');

describe('servers.schema.json', () => {
  it('issue 18 §2: the committed servers.schema.json is the one generated from the zod schema (run npm run schema)', () => {
    expect(committed()).toBe(JSON.stringify(configJsonSchema(), null, 2) + '\n');
  });

  it('issue 18 §2: the bundled servers.json names the schema in $schema and still loads', () => {
    const bundled = JSON.parse(readFileSync(join(ROOT, 'servers.json'), 'utf8')) as { $schema?: string };
    expect(bundled.$schema).toBe('./servers.schema.json');
    expect(() => loadConfigFile(join(ROOT, 'servers.json'), { ...process.env })).not.toThrow();
  });

  it('issue 18 §2: the schema describes what clients write: servers, inputs, URL-only and stdio entries with envFile', () => {
    const schema = JSON.parse(committed()) as {
      properties: Record<string, { additionalProperties?: { anyOf: Array<{ properties: Record<string, unknown>; required?: string[] }> } }>;
      additionalProperties: boolean;
    };
    expect(Object.keys(schema.properties)).toEqual(expect.arrayContaining(['$schema', 'mcpServers', 'servers', 'inputs', 'broker', 'policy']));
    expect(schema.additionalProperties).toBe(false);
    const kinds = schema.properties.mcpServers!.additionalProperties!.anyOf;
    expect(kinds).toHaveLength(4);
    expect(Object.keys(kinds[0]!.properties).sort()).toEqual([...STDIO_SERVER_FIELDS].sort());
    // A URL-only entry: `type` is optional on the Streamable HTTP kind.
    expect(kinds[1]!.required).toEqual(['url']);
    expect(schema.properties.servers!.additionalProperties).toEqual(schema.properties.mcpServers!.additionalProperties);
  });
});
