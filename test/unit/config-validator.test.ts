/**
 * Issue 19 (one config validator): the validator generated from servers.schema.json
 * (scripts/config-validator.mjs) against the zod schema it comes from. The early start
 * (`earlyStdioSpecs`) accepts exactly the configs the loader accepts, refinements aside, and
 * starts the very processes the validated config starts.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { serverKind, type StdioServerConfig } from '../../src/config/schema.js';
import { validateConfig } from '../../src/config/validate-config.generated.js';
import { earlyStdioSpecs } from '../../src/upstream/early-spawn.js';
import { stdioSpawnSpec } from '../../src/upstream/spawn-env.js';
import type { ChildSpawnSpec } from '../../src/upstream/child-transport.js';
import { ROOT } from '../e2e/helpers.js';

const BASE = '/srv/conf';
const ENV = { HOME: '/home/u', PATH: '/usr/bin', TOKEN: 'secret-token-value' };

/** What the loader starts, or undefined when it refuses the config. */
function loaderSpecs(raw: unknown): ChildSpawnSpec[] | undefined {
  let config;
  try {
    config = parseConfig(raw, { baseDir: BASE, env: ENV });
  } catch {
    return undefined;
  }
  return Object.values(config.mcpServers)
    .filter((s) => serverKind(s) === 'stdio' && !s.disabled)
    .map((s) => stdioSpawnSpec(s as StdioServerConfig, config.broker.env.inherit));
}

const early = (raw: unknown) => earlyStdioSpecs(raw, BASE, ENV);

/** A value for a field: mostly well typed, now and then not (one bad field refuses the whole file). */
const maybe = <T, const B extends readonly unknown[]>(good: fc.Arbitrary<T>, ...bad: B): fc.Arbitrary<T | B[number]> => fc.oneof({ weight: 30, arbitrary: good }, { weight: 1, arbitrary: fc.constantFrom(...bad) });
const word = maybe(fc.constantFrom('a', 'b', 'srv', 'x-1', 'Fs'), 'a__b', '-x', 'broker', 'estate', '');
const text = maybe(fc.constantFrom('node', 'uvx', 'x.js', '${configDir}/bin', '${env:TOKEN}', '${UNSET:-d}', '${userHome}', '${workspaceFolder}/w'), '${env:UNSET}', '${nope:x}', '${', '');
/** Now and then a field no schema knows. */
const stray = fc.oneof({ weight: 30, arbitrary: fc.constant({}) }, { weight: 1, arbitrary: fc.constantFrom({ bogus: 1 }, { enabled: false }, { url: 'https://example.com' }) });

const stdioServer = fc
  .tuple(
    fc.record(
      {
        type: maybe(fc.constant('stdio'), 'http', 'bogus'),
        command: maybe(text, 3, null),
        args: maybe(fc.array(text, { maxLength: 3 }), 'x.js', [1]),
        env: maybe(fc.dictionary(fc.constantFrom('A', 'MODE', 'API_TOKEN'), text, { maxKeys: 2 }), 'A=1', { N: 1 }),
        inheritEnv: maybe(fc.array(fc.constantFrom('PATH', 'HOME', 'LANG'), { maxLength: 2 }), 'PATH'),
        cwd: maybe(fc.constantFrom('sub', '/opt/srv', '${configDir}/w'), 3),
        disabled: maybe(fc.boolean(), 'true'),
        required: maybe(fc.boolean(), 1),
        prefix: maybe(fc.oneof(word, fc.constant(false)), true, 5),
        timeoutMs: maybe(fc.integer({ min: 1, max: 100_000 }), 0, -1, 1.5, '10'),
        connectTimeoutMs: maybe(fc.integer({ min: 1, max: 100_000 }), 0),
        era: maybe(fc.constantFrom('auto', 'legacy', 'modern'), 'bogus'),
        isolation: maybe(fc.constantFrom('shared', 'per-principal'), 'bogus'),
        verdictFromText: maybe(fc.boolean(), 'no'),
        resourcePriority: maybe(fc.integer({ min: -5, max: 5 }), 0.5),
        tools: maybe(fc.constant({}), []),
      },
      { requiredKeys: ['command'] },
    ),
    stray,
  )
  .map(([server, extra]) => ({ ...server, ...extra }));
const remoteServer = fc.record(
  {
    type: maybe(fc.constantFrom('http', 'sse', 'streamable-http'), 'stdio', 'bogus'),
    url: maybe(fc.constantFrom('https://example.com/mcp', 'https://${env:TOKEN}@example.com/mcp'), 3),
    headers: maybe(fc.dictionary(fc.constantFrom('Authorization', 'X-Key'), text, { maxKeys: 2 }), 'h'),
    prefix: maybe(word, 5),
    disabled: fc.boolean(),
  },
  { requiredKeys: ['url'] },
);
const broker = fc.record(
  {
    timeoutMs: maybe(fc.integer({ min: 1, max: 100_000 }), 0, 'x'),
    env: maybe(fc.record({ inherit: maybe(fc.array(fc.constantFrom('HOME', 'LANG', 'PATH'), { maxLength: 3 }), 'HOME') }, { requiredKeys: [] }), []),
    budgetPerUnit: maybe(fc.oneof(fc.integer({ min: 1, max: 10 }), fc.constant('unlimited')), 'lots', 0),
  },
  { requiredKeys: [] },
);
const config = fc
  .tuple(
    fc.record(
      {
        mcpServers: maybe(fc.dictionary(word, fc.oneof(stdioServer, remoteServer), { maxKeys: 4 }), [], 'x'),
        broker: maybe(broker, 'yes'),
        principals: maybe(fc.dictionary(fc.constantFrom('alice', 'bob', 'local'), fc.record({ token: fc.constantFrom('t1-long-token', 't2-long-token', '${env:UNSET}') }), { maxKeys: 2 }), []),
        functions: maybe(fc.array(fc.constantFrom('./f.mjs'), { maxLength: 1 }), './f.mjs'),
      },
      { requiredKeys: [] },
    ),
    stray,
  )
  .map(([raw, extra]) => ({ ...raw, ...extra }));

describe('the generated config validator', () => {
  it('issue 19: accepts exactly what the zod schema accepts, and the early start then starts what the validated config starts (property, 3000 configs)', () => {
    let accepted = 0;
    fc.assert(
      fc.property(config, (raw) => {
        const want = loaderSpecs(raw);
        if (want) accepted++;
        expect(early(raw)).toEqual(want);
      }),
      { numRuns: 3000 },
    );
    // Both sides are exercised: a good share of the configs is valid.
    expect(accepted).toBeGreaterThan(300);
  });

  it('issue 19: refuses what the zod schema refuses, field by field', () => {
    const ok = { command: 'node', args: ['ok.js'] };
    const refused: unknown[] = [
      { mcpServers: { ok, bad: { command: 'node', era: 'bogus' } } },
      { mcpServers: { ok, bad: { command: 'node', isolation: 'per-call' } } },
      { mcpServers: { ok, bad: { command: 'node', isolationMaxPrincipals: 0 } } },
      { mcpServers: { ok, bad: { url: 'https://example.com', headers: { A: 1 } } } },
      { mcpServers: { ok, bad: { type: 'sse' } } },
      { mcpServers: { ok }, policy: { mode: 'bogus' } },
      { mcpServers: { ok }, policy: { rules: [{ tools: 3 }] } },
      { mcpServers: { ok }, http: { maxSessions: -1 } },
      { mcpServers: { ok }, observability: { bogus: true } },
      { mcpServers: { ok }, inputs: [{ type: 'pickString', id: 'k' }] },
      { mcpServers: { ok }, functions: 'f.mjs' },
      { mcpServers: { ok }, estate: { enabled: 'yes' } },
    ];
    for (const raw of refused) {
      expect(loaderSpecs(raw), JSON.stringify(raw)).toBeUndefined();
      expect(early(raw), JSON.stringify(raw)).toBeUndefined();
    }
  });

  it('issue 19: what a JSON Schema cannot say (the zod refinements) is accepted early and refused by the loader, which then ends the children (settleParked)', () => {
    const ok = { command: 'node', args: ['ok.js'] };
    const refinedOnly: unknown[] = [
      // a task's staleness at or below its heartbeat
      { mcpServers: { ok }, broker: { taskHeartbeatMs: 5_000, taskStaleMs: 5_000 } },
      // a REST server without what it needs to make a request
      { mcpServers: { ok, api: { type: 'rest' } } },
    ];
    for (const raw of refinedOnly) {
      expect(loaderSpecs(raw), JSON.stringify(raw)).toBeUndefined();
      expect(early(raw), JSON.stringify(raw)).toHaveLength(1);
    }
  });

  it('issue 19: the bundled servers.json is accepted and gets the same spawn specs', () => {
    const raw = JSON.parse(readFileSync(join(ROOT, 'servers.json'), 'utf8')) as unknown;
    expect(validateConfig(structuredClone(raw))).toBe(true);
    const specs = early(raw);
    expect(specs).toHaveLength(3);
    expect(specs).toEqual(loaderSpecs(raw));
  });

  it('issue 19: the generated module imports nothing at run time (ajv is needed to build it, not to run it)', () => {
    const code = readFileSync(join(ROOT, 'src/config/validate-config.generated.js'), 'utf8');
    expect(code).not.toMatch(/\brequire\(|^\s*import\b|\bimport\(/m);
  });
});
