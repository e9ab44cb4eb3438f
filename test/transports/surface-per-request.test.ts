/**
 * A modern HTTP request that the SDK serves builds a new DownstreamSession, and with it the
 * upstreams' surface for its principal (gateway.ts `surface`): which upstreams the principal
 * sees something of is judged once per roster and policy, not again for every request (it walked
 * every tool, prompt, resource and template of an upstream hidden from the principal, per
 * request: ms of CPU on the path of a modern tools/call). A reload that changes the policy
 * judges again.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { fixture, nodeServer } from '../e2e/helpers.js';
import { serveInProcess, type InProcessHttp } from './in-process.js';

const upstream = (instructions: string) => nodeServer(fixture('modern-upstream.mjs'), { required: true, env: { FIXTURE_INSTRUCTIONS: instructions } });
const config = (denyTwo: boolean) => ({
  mcpServers: { one: upstream('start with whoami'), two: upstream('two knows the regions') },
  principals: { alice: { token: '${env:ALICE_TOKEN}' } },
  policy: { rules: denyTwo ? [{ tools: ['two__*'], principals: ['alice'], action: 'deny' }] : [] },
  estate: { enabled: false },
});
const env = { ALICE_TOKEN: 'alice-token-0123456789abcdef' };

describe('the surface a modern request is built with', () => {
  let served: InProcessHttp | undefined;
  afterEach(async () => served?.close());

  it('judges what a principal sees of each upstream once per roster and policy; a reload judges again', async () => {
    served = await serveInProcess(config(true), { env });
    const { gateway } = served;
    await gateway.ready;
    const judged = vi.spyOn(gateway, 'toolVisibility', 'get');
    expect(gateway.surface('alice').instructions).toBe('one: start with whoami');
    const first = judged.mock.calls.length;
    expect(first).toBeGreaterThan(0);
    for (let i = 0; i < 5; i++) expect(gateway.surface('alice').instructions).toBe('one: start with whoami');
    expect(judged.mock.calls.length).toBe(first);
    await gateway.reload(parseConfig(config(false), { baseDir: served.dir, env }));
    expect(gateway.surface('alice').instructions).toBe('one: start with whoami\n\ntwo: two knows the regions');
  }, 60_000);
});
