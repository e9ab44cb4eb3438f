/**
 * A stdio connection's modern `server/discover` follows the policy and the roster as they are
 * now (transports/discover-answer.ts): a config reload that hides an upstream whole from the
 * stdio principal (`local`) takes that upstream's instructions out of the next answer on the same
 * connection, allowing it again brings them back, and an upstream the reload adds shows its own.
 * The answer was built once per connection and kept whatever changed: the hidden upstream's
 * instructions still reached the client, and an added one's never did.
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { fixture, nodeServer, spawnRawBroker, waitFor, writeConfig, type RawBroker } from './helpers.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const _meta = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientCapabilities': {},
  'io.modelcontextprotocol/clientInfo': { name: 'discover-reload', version: '1.0.0' },
};

const upstream = (instructions: string) => nodeServer(fixture('modern-upstream.mjs'), { env: { FIXTURE_INSTRUCTIONS: instructions } });

const ONE = 'one: start with whoami';
const TWO = 'two: two knows the regions';
const THREE = 'three: three counts';

describe("a stdio connection's server/discover after a config reload", () => {
  it('leaves out an upstream the reload hides from local, gives it again once allowed, and gives one the reload adds', async () => {
    const written = writeConfig({ one: upstream('start with whoami'), two: upstream('two knows the regions') });
    cleanups.push(() => rmSync(written.dir, { recursive: true, force: true }));
    const broker = spawnRawBroker({ servers: {}, written });
    cleanups.push(() => broker.close());

    let id = 0;
    const request = async (method: string) => {
      const answer = await broker.request(++id, method, { _meta }, 20_000);
      expect(answer.error).toBeUndefined();
      return answer.result as Record<string, any>;
    };
    const instructions = async () => (await request('server/discover')).instructions as string | undefined;
    const toolNames = async () => ((await request('tools/list')).tools as { name: string }[]).map((t) => t.name);

    /** Rewrites servers.json and waits for the broker to log that it applied it. */
    const reload = async (broker: RawBroker, edit: (config: Record<string, any>) => void) => {
      const reloads = broker.stderr().split('config reloaded').length;
      const config = JSON.parse(readFileSync(written.configPath, 'utf8'));
      edit(config);
      writeFileSync(written.configPath, JSON.stringify(config, null, 2));
      await waitFor(() => broker.stderr().split('config reloaded').length > reloads, 'config reloaded logged', 20_000, 50);
    };

    expect(await instructions()).toBe(`${ONE}\n\n${TWO}`);

    await reload(broker, (c) => {
      c.policy = { rules: [{ tools: ['two__*'], principals: ['local'], action: 'deny' }] };
    });
    expect((await toolNames()).some((name) => name.startsWith('two__'))).toBe(false);
    expect(await instructions()).toBe(ONE);
    // Asked again with nothing changed: the same answer.
    expect(await instructions()).toBe(ONE);

    await reload(broker, (c) => {
      delete c.policy;
    });
    expect(await toolNames()).toContain('two__whoami');
    expect(await instructions()).toBe(`${ONE}\n\n${TWO}`);

    await reload(broker, (c) => {
      c.mcpServers.three = upstream('three counts');
    });
    expect(await toolNames()).toContain('three__whoami');
    expect(await instructions()).toBe(`${ONE}\n\n${TWO}\n\n${THREE}`);
  }, 60_000);
});
