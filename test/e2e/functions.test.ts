/**
 * User function tools end to end (servers.json `functions`): the shipped example module
 * `tools/weather.js` served through the real CLI and the broker path; a module that fails to
 * load, one that exports no function tool, and a name that collides with an upstream tool each
 * make the CLI exit 2 naming the module.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CallToolResult } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import { MODULE_ERROR_MAX_CHARS } from '../../src/router/modules.js';
import { fixture, nodeServer, ROOT, spawnRawBroker, startBroker, type RawBroker, type StartedBroker } from './helpers.js';

const outcome = (r: { _meta?: unknown }) => (r._meta as Record<string, unknown> | undefined)?.['mcp-broker/outcome'];
const WEATHER = join(ROOT, 'tools/weather.js');

let broker: StartedBroker | undefined;
let raw: RawBroker | undefined;
afterEach(async () => {
  await broker?.close();
  await raw?.close();
  broker = raw = undefined;
});

describe('function tools (e2e)', () => {
  it('tools/weather.js is served under its bare name, with an inputSchema generated from its zod schema', async () => {
    broker = await startBroker({ servers: { echo: nodeServer(fixture('echo.mjs')) }, extra: { functions: [WEATHER] } });
    const tools = (await broker.client.listTools()).tools;
    const weather = tools.find((t) => t.name === 'get_weather')!;
    expect(weather).toBeDefined();
    expect(weather.inputSchema).toMatchObject({
      type: 'object',
      properties: { city: { type: 'string', minLength: 1 }, units: { enum: ['celsius', 'fahrenheit'], default: 'celsius' }, days: { default: 3 } },
      required: ['city'],
    });
    expect(weather.annotations).toMatchObject({ readOnlyHint: true });
    expect(tools.map((t) => t.name)).toContain('echo__echo');
  });

  it('a call goes through the broker path: parsed arguments (trim, defaults), ok, deterministic, recorded as functions/get_weather', async () => {
    broker = await startBroker({ servers: {}, extra: { functions: [WEATHER] } });
    const first = (await broker.client.callTool({ name: 'get_weather', arguments: { city: '  Oslo ' } })) as CallToolResult;
    expect(outcome(first)).toBe('ok');
    const forecast = first.structuredContent as { city: string; units: string; forecast: unknown[] };
    expect(forecast.city).toBe('Oslo');
    expect(forecast.units).toBe('celsius');
    expect(forecast.forecast).toHaveLength(3);
    const second = (await broker.client.callTool({ name: 'get_weather', arguments: { city: 'Oslo' } })) as CallToolResult;
    expect(second.structuredContent).toEqual(first.structuredContent);

    const denied = (await broker.client.callTool({ name: 'get_weather', arguments: { city: 'Atlantis' } })) as CallToolResult;
    expect(outcome(denied)).toBe('denied');
    expect((denied.content[0] as { text: string }).text).toBe('denied: no forecasts for sunken cities');

    const invalid = (await broker.client.callTool({ name: 'get_weather', arguments: { city: '', days: 9 } })) as CallToolResult;
    expect(outcome(invalid)).toBe('invalid_arguments');
    expect((invalid.content[0] as { text: string }).text).toMatch(/→ at city.*→ at days/);

    const records = await broker.records();
    expect(records.map((r) => [r.subject, r.name, r.outcome, r.status])).toEqual([
      ['functions/get_weather', 'get_weather', 'ok', 200],
      ['functions/get_weather', 'get_weather', 'ok', 200],
      ['functions/get_weather', 'get_weather', 'denied', 403],
      ['functions/get_weather', 'get_weather', 'invalid_arguments', 400],
    ]);
  });

  it.each([
    ['throws-on-load.mjs', /bad config: functions\[0\]: cannot load function module .*throws-on-load\.mjs/],
    ['exports-nothing.mjs', /bad config: functions\[0\]: function module .*exports-nothing\.mjs exports no function tool/],
  ])('%s: the CLI exits 2 naming the module', async (file, message) => {
    raw = spawnRawBroker({ servers: {}, extra: { functions: [join(ROOT, 'test/fixtures/functions', file)] } });
    raw.initialize().catch(() => undefined);
    expect(await raw.exited).toBe(2);
    expect(raw.stderr()).toMatch(message);
  });

  it('a module whose load error holds a configured secret across the cut: the bad config line shows none of it', async () => {
    // An upstream's env value: a secret the scrubber knows exactly. It starts 8 characters
    // before the cut at MODULE_ERROR_MAX_CHARS, which kept those 8 when it came before the scrub.
    const secret = 'Zt9-module-error-secret-value';
    const dir = mkdtempSync(join(tmpdir(), 'mcp-broker-e2e-module-secret-'));
    try {
      const module = join(dir, 'throws-secret.mjs');
      writeFileSync(module, `throw new Error(${JSON.stringify(`${'x'.repeat(MODULE_ERROR_MAX_CHARS - 10)} ${secret} and the rest`)});\n`);
      raw = spawnRawBroker({ servers: { echo: nodeServer(fixture('echo.mjs'), { env: { ECHO_TOKEN: secret } }) }, extra: { functions: [module] } });
      raw.initialize().catch(() => undefined);
      expect(await raw.exited).toBe(2);
      expect(raw.stderr()).toMatch(/bad config: functions\[0\]: cannot load function module .*throws-secret\.mjs: x+ \[REDACTE/);
      expect(raw.stderr()).not.toContain(secret.slice(0, 4));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a function tool named like an upstream tool makes the CLI exit 2', async () => {
    raw = spawnRawBroker({
      servers: { echo: nodeServer(fixture('echo.mjs'), { prefix: false }) },
      extra: { functions: [join(ROOT, 'test/fixtures/functions/echo-named.mjs')] },
    });
    raw.initialize().catch(() => undefined);
    expect(await raw.exited).toBe(2);
    expect(raw.stderr()).toMatch(/bad config: functions: tool "echo" is defined by a function module and also advertised by an upstream/);
  });
});
