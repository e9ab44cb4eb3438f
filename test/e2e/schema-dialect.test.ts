/**
 * JSON Schema 2020-12 through the broker (issue 13 §5), real CLI on raw pipes in front of the
 * schema fixture: an upstream tool's 2020-12 `inputSchema` and `outputSchema` are advertised
 * byte for byte as the upstream wrote them (every keyword kept, unknown `x-` ones included), and
 * output evaluation reads a schema without `$schema` as 2020-12.
 */
import { execFileSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, nodeServer, spawnRawBroker, type RawBroker } from './helpers.js';

const CANARY = 'canary-dialect-5f0c2b9e71';

interface PrintedTool {
  name: string;
  inputSchema: object;
  outputSchema?: object;
}

describe('JSON Schema 2020-12 through the broker', () => {
  let broker: RawBroker;
  const printed = JSON.parse(execFileSync(process.execPath, [fixture('schema.mjs'), '--print'], { encoding: 'utf8' })) as { tools: PrintedTool[] };
  const modern = printed.tools.find((t) => t.name === 'modern')!;

  beforeAll(async () => {
    // A configured secret, so scrubbing changes structuredContent and the broker checks it against the outputSchema.
    broker = spawnRawBroker({
      servers: { schema: nodeServer(fixture('schema.mjs'), { env: { CANARY: '${env:DIALECT_E2E_CANARY}' } }) },
      env: { DIALECT_E2E_CANARY: CANARY },
    });
    await broker.initialize();
  });
  afterAll(async () => broker?.close());

  it('advertises the upstream inputSchema and outputSchema byte-identical (prefixItems, $defs, dependentSchemas, unevaluatedProperties, x- keywords)', async () => {
    const from = broker.stdout().length;
    const answer = await broker.request(2, 'tools/list', {});
    const tools = (answer.result as { tools: Array<{ name: string; inputSchema: object; outputSchema?: object }> }).tools;
    const advertised = tools.find((t) => t.name === 'schema__modern')!;
    expect(advertised).toBeDefined();
    // Byte for byte: the upstream serialised its schema with JSON.stringify; the broker's line holds the same bytes.
    const line = broker.stdout().subarray(from).toString('utf8');
    expect(line).toContain(`"inputSchema":${JSON.stringify(modern.inputSchema)}`);
    expect(line).toContain(`"outputSchema":${JSON.stringify(modern.outputSchema)}`);
    expect(JSON.stringify(advertised.inputSchema)).toBe(JSON.stringify(modern.inputSchema));
    for (const original of printed.tools) {
      const tool = tools.find((t) => t.name === `schema__${original.name}`)!;
      expect(JSON.stringify(tool.inputSchema), original.name).toBe(JSON.stringify(original.inputSchema));
    }
  });

  it('output evaluation reads an outputSchema without $schema as 2020-12: a scrubbed prefixItems tuple that fits is passed on, a misfit withheld', async () => {
    // Under draft-07 `items: false` forbids every item, so the fitting pair would be withheld.
    const ok = (await broker.request(3, 'tools/call', { name: 'schema__modern', arguments: { pair: [`key ${CANARY}`, 1] } })).result as Record<string, any>;
    expect(ok._meta['mcp-broker/outcome']).toBe('ok');
    expect(ok.structuredContent).toEqual({ pair: ['key [REDACTED]', 1] });
    const misfit = (await broker.request(4, 'tools/call', { name: 'schema__modern', arguments: { pair: [`key ${CANARY}`, 1, 'extra'] } })).result as Record<string, any>;
    expect(misfit._meta['mcp-broker/outcome']).toBe('withheld');
    expect(JSON.stringify([ok, misfit])).not.toContain(CANARY);
  });
});
