/**
 * Found by a review of the HTTP face: a reload that removes a principal (or configures principals
 * where there were none, ending the tokenless `local` caller) ended its sessions but left its
 * open `GET /api/v1/events` stream running, so a removed operator kept receiving every
 * principal's records. Its streams close now. And what a caller sends that could hurt everyone:
 * a `?tool=` pattern that compiled to a backtracking expression, a megabyte `subject` recorded as
 * a name, a task listen past the SDK's content-type check.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, nodeServer, waitFor } from './helpers.js';
import { http, startHttpBroker, type HttpBroker } from '../transports/harness.js';

const TOKENS = { ALICE_TOKEN: 'alice-revoke-token-0123456789', OPS_TOKEN: 'ops-revoke-token-01234567890' };
const ALICE = { authorization: `Bearer ${TOKENS.ALICE_TOKEN}` };
const OPS = { authorization: `Bearer ${TOKENS.OPS_TOKEN}` };

function editConfig(path: string, edit: (config: Record<string, any>) => void): void {
  const config = JSON.parse(readFileSync(path, 'utf8'));
  edit(config);
  writeFileSync(path, JSON.stringify(config, null, 2));
}

/** `GET /api/v1/events` read as it comes, once subscribed; `ended` resolves when the broker closes it. */
async function liveEvents(url: string, headers: Record<string, string>) {
  const aborter = new AbortController();
  const res = await fetch(`${url}/api/v1/events`, { headers, signal: aborter.signal });
  expect(res.status).toBe(200);
  let text = '';
  const ended = (async () => {
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    for (;;) {
      const { value, done } = await reader.read().catch(() => ({ value: undefined, done: true as const }));
      if (done) return 'ended';
      text += decoder.decode(value, { stream: true });
    }
  })();
  await waitFor(() => text.includes(': subscribed'), 'the subscription');
  return { ended, text: () => text, close: () => aborter.abort() };
}

describe('a principal removed by a reload', () => {
  let broker: HttpBroker;
  beforeAll(async () => {
    broker = await startHttpBroker({
      servers: { echo: nodeServer(fixture('echo.mjs'), { required: true }) },
      extra: { principals: { alice: { token: '${env:ALICE_TOKEN}' }, ops: { token: '${env:OPS_TOKEN}', role: 'operator' } } },
      env: TOKENS,
    });
  });
  afterAll(async () => broker?.close());

  it("has its open /api/v1/events stream closed: a removed operator sees no other principal's record", async () => {
    const events = await liveEvents(broker.url, OPS);
    editConfig(join(broker.dir, 'servers.json'), (c) => void delete c.principals.ops);
    expect(await events.ended).toBe('ended');
    expect((await http(`${broker.url}/api/v1/calls`, { headers: OPS })).status).toBe(401);
    const call = await http(`${broker.url}/api/v1/mcp/call`, { headers: ALICE, body: { subject: 'echo__echo', args: { text: 'alice' } } });
    expect(call.status).toBe(200);
    expect(events.text()).not.toContain(call.body.callId);
    events.close();
  });
});

describe('principals configured where there were none', () => {
  let broker: HttpBroker;
  beforeAll(async () => {
    broker = await startHttpBroker({ servers: { echo: nodeServer(fixture('echo.mjs'), { required: true }) }, env: TOKENS });
  });
  afterAll(async () => broker?.close());

  it('closes the tokenless (local) events stream opened before', async () => {
    const events = await liveEvents(broker.url, {});
    editConfig(join(broker.dir, 'servers.json'), (c) => void (c.principals = { alice: { token: '${env:ALICE_TOKEN}' } }));
    expect(await events.ended).toBe('ended');
    expect((await http(`${broker.url}/api/v1/calls`)).status).toBe(401);
    events.close();
  });
});

describe('what a caller sends the admin API and /mcp', () => {
  let broker: HttpBroker;
  beforeAll(async () => {
    broker = await startHttpBroker({
      servers: { echo: nodeServer(fixture('echo.mjs'), { required: true }) },
      extra: { principals: { alice: { token: '${env:ALICE_TOKEN}' } } },
      env: TOKENS,
    });
  });
  afterAll(async () => broker?.close());

  it('?tool= takes * and ? only (other glob syntax is 400), matched without a backtracking expression', async () => {
    const made = await http(`${broker.url}/api/v1/mcp/call`, { headers: ALICE, body: { subject: 'a'.repeat(300) } });
    expect(made.body.outcome).toBe('unregistered');
    for (const bad of ['*(*?)x', '{a,b}*', '[ab]*', '!(x)', 'a+(b)']) {
      const refused = await http(`${broker.url}/api/v1/calls?tool=${encodeURIComponent(bad)}`, { headers: ALICE });
      expect(refused.status, bad).toBe(400);
    }
    // Many stars over a long name: answered (a backtracking expression would stall here for minutes).
    const stars = await http(`${broker.url}/api/v1/calls?tool=${encodeURIComponent(`${'*a'.repeat(12)}*b`)}`, { headers: ALICE });
    expect(stars.status).toBe(200);
    expect(stars.body.calls).toEqual([]);
    const found = await http(`${broker.url}/api/v1/calls?tool=${encodeURIComponent('?/aaa*')}`, { headers: ALICE });
    expect(found.body.calls.map((r: { callId: string }) => r.callId)).toEqual([made.body.callId]);
  });

  it('an events stream whose reader stops reading is closed once it falls 8 MiB behind, and the broker serves on', async () => {
    const { hostname, port } = new URL(broker.url);
    const socket = connect(Number(port), hostname);
    let head = '';
    const subscribed = new Promise<void>((resolve) =>
      socket.on('data', (chunk: Buffer) => {
        head += chunk.toString('utf8');
        if (head.includes(': subscribed')) {
          socket.pause(); // from here on nothing is read
          resolve();
        }
      }),
    );
    socket.on('error', () => undefined);
    socket.write(`GET /api/v1/events HTTP/1.1\r\nHost: ${hostname}:${port}\r\nAuthorization: ${ALICE.authorization}\r\n\r\n`);
    await subscribed;
    // About 26 MB of records: more than the kernel's buffers and the 8 MiB the broker keeps.
    const fellBehind = () => broker.stderr().includes('events stream closed: its reader fell behind');
    for (let i = 0; i < 100 && !fellBehind(); i++) {
      const call = await http(`${broker.url}/api/v1/mcp/call`, { headers: ALICE, body: { subject: 'echo__echo', args: { text: 'x'.repeat(256 * 1024) } } });
      expect(call.status).toBe(200);
    }
    await waitFor(fellBehind, 'the broker to close the stream');
    socket.destroy();
    expect((await http(`${broker.url}/healthz`)).status).toBe(200);
  });

  it('a subject longer than any tool name is 400, and nothing is recorded for it', async () => {
    const before = broker.records().length;
    const refused = await http(`${broker.url}/api/v1/mcp/call`, { headers: ALICE, body: { subject: 'x'.repeat(100_000) } });
    expect(refused.status).toBe(400);
    expect(refused.body.error.message).toContain('no tool name is longer than 512');
    expect(broker.records().length).toBe(before);
  });

  it('a 2026-07-28 task listen whose Content-Type is not JSON is 415, as the SDK answers every other POST', async () => {
    const body = {
      jsonrpc: '2.0',
      id: 7,
      method: 'subscriptions/listen',
      params: {
        notifications: { taskIds: ['nope'] },
        _meta: {
          'io.modelcontextprotocol/protocolVersion': '2026-07-28',
          'io.modelcontextprotocol/clientCapabilities': { extensions: { 'io.modelcontextprotocol/tasks': {} } },
          'io.modelcontextprotocol/clientInfo': { name: 'x', version: '1' },
        },
      },
    };
    const res = await fetch(`${broker.url}/mcp`, {
      method: 'POST',
      headers: { ...ALICE, 'content-type': 'text/plain', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'subscriptions/listen' },
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(415);
    await res.body?.cancel();
  });
});
