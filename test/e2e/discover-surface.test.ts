/**
 * Issue 19 (cold start of a negotiating client): a modern `server/discover` on stdio carries the
 * upstreams' surface (upstream/surface.ts): the extensions every upstream declares and their
 * instructions, scrubbed like everything else an upstream sends toward a client. The first start
 * finds it by waiting for the upstreams' first dial and remembers it in the store; a later start
 * with the same upstream definitions answers at once with the remembered one, while its upstream
 * is still loading (here: held back by a gate file), and a child that never became ready is
 * ended at once when stdin closes, not after the grace a served child gets; such a cut-short
 * dial leaves the remembered surface alone.
 */
import { mkdtempSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { fixture, isAlive, nodeServer, readNdjson, spawnRawBroker, waitFor, writeConfig, type RawBroker } from './helpers.js';

const TASKS = 'io.modelcontextprotocol/tasks';
const WIDGETS = 'com.example/widgets';
const SECRET = 'tok-9f8e7d6c5b4a3921';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

type Answer = Record<string, any>;

function discover(b: RawBroker): Promise<Answer> {
  const _meta = {
    'io.modelcontextprotocol/protocolVersion': '2026-07-28',
    'io.modelcontextprotocol/clientCapabilities': {},
    'io.modelcontextprotocol/clientInfo': { name: 'discover-surface', version: '1.0.0' },
  };
  return b.request('discover', 'server/discover', { _meta }, 15_000);
}

describe('the upstreams in a modern server/discover (stdio)', () => {
  it('are found at the first start (instructions scrubbed), remembered, and given at once by the next start while its upstream still loads', async () => {
    const work = mkdtempSync(join(tmpdir(), 'mcp-broker-surface-'));
    cleanups.push(() => rmSync(work, { recursive: true, force: true }));
    const gate = join(work, 'gate');
    const log = join(work, 'fixture.ndjson');
    const servers = {
      md: nodeServer(fixture('modern-upstream.mjs'), {
        env: { API_TOKEN: SECRET, FIXTURE_LOG: log, FIXTURE_GATE: gate, FIXTURE_EXTENSION: WIDGETS, FIXTURE_INSTRUCTIONS: `call whoami first (token ${SECRET})` },
      }),
    };
    // One servers.json for both starts (a stdio upstream's working folder is the config's, part of its definition).
    const written = writeConfig(servers);
    cleanups.push(() => rmSync(written.dir, { recursive: true, force: true }));
    const start = () => {
      const b = spawnRawBroker({ servers, written, args: ['--log-level', 'debug'], env: { MCP_BROKER_LOG_FORMAT: 'json' } });
      cleanups.push(() => b.close());
      return b;
    };

    const first = start();
    const found = await discover(first);
    expect(found.result.capabilities.extensions).toEqual({ [WIDGETS]: {}, [TASKS]: {} });
    expect(found.result.instructions).toBe('md: call whoami first (token [REDACTED])');
    await first.close();

    // The next start, same upstream definitions: its upstream cannot serve while the gate exists.
    writeFileSync(gate, '');
    const second = start();
    const remembered = await discover(second);
    expect(remembered.result.capabilities.extensions).toEqual({ [WIDGETS]: {}, [TASKS]: {} });
    expect(remembered.result.instructions).toBe('md: call whoami first (token [REDACTED])');
    const gated = await waitFor(() => readNdjson<{ event: string; pid: number }>(log).find((e) => e.event === 'gated'), 'the upstream held at its gate');

    // stdin closes before the upstream ever became ready: it is ended at once, and the broker exits.
    second.child.stdin!.end();
    expect(await second.exited).toBe(0);
    expect(second.stderr()).toContain('upstream not ready at close: ended at once (SIGTERM)');
    expect(isAlive(gated.pid)).toBe(false);

    // That start's dial, cut short, left the remembered surface as it was (a disposable probe
    // process is shut down that way by every negotiating client).
    const third = start();
    const again = await discover(third);
    expect(again.result.capabilities.extensions).toEqual({ [WIDGETS]: {}, [TASKS]: {} });
    expect(again.result.instructions).toBe('md: call whoami first (token [REDACTED])');
  });

  it('are not given from memory while the policy may hide an upstream: the next start waits for its upstreams, and a hidden one says nothing', async () => {
    const work = mkdtempSync(join(tmpdir(), 'mcp-broker-surface-'));
    cleanups.push(() => rmSync(work, { recursive: true, force: true }));
    const gate = join(work, 'gate');
    const log = join(work, 'fixture.ndjson');
    const servers = {
      md: nodeServer(fixture('modern-upstream.mjs'), { env: { FIXTURE_LOG: log, FIXTURE_GATE: gate, FIXTURE_EXTENSION: WIDGETS, FIXTURE_INSTRUCTIONS: 'call whoami first' } }),
    };
    // Every tool of md, and so its prompts and resources, denied to the stdio client.
    const written = writeConfig(servers, { policy: { rules: [{ tools: ['md__*'], action: 'deny' }] } });
    cleanups.push(() => rmSync(written.dir, { recursive: true, force: true }));
    const start = () => {
      const b = spawnRawBroker({ servers, written });
      cleanups.push(() => b.close());
      return b;
    };

    const first = start();
    const found = await discover(first);
    expect(found.result.capabilities.extensions).toEqual({ [WIDGETS]: {}, [TASKS]: {} });
    expect(found.result.instructions).toBeUndefined();
    await first.close();

    // The next start: the remembered surface (stored with md's instructions) is not served while
    // md is still loading; the answer comes once md is up, and without them.
    writeFileSync(gate, '');
    const second = start();
    let answered = false;
    const pending = discover(second).then((answer) => ((answered = true), answer));
    await waitFor(() => readNdjson<{ event: string }>(log).filter((e) => e.event === 'gated').length >= 1 || undefined, 'the upstream held at its gate');
    expect(answered).toBe(false);
    unlinkSync(gate);
    const later = await pending;
    expect(later.result.capabilities.extensions).toEqual({ [WIDGETS]: {}, [TASKS]: {} });
    expect(later.result.instructions).toBeUndefined();
  });
});
