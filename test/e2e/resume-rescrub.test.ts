/**
 * A Streamable HTTP stream resumed with `Last-Event-ID` replayed its stored events as first sent,
 * scrubbed with the secrets known then: a reload that made a value in them a secret left it
 * readable to a client that reconnects. Replayed now scrubbed with the secrets of now, the
 * answer's JSON-RPC id intact. The real CLI serving HTTP on 127.0.0.1, a real reload of its config file.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, nodeServer, waitFor } from './helpers.js';
import { MCP_POST_HEADERS, openRawSession, readStream, sseMessages, startHttpBroker, type HttpBroker } from '../transports/harness.js';

const LATER = `later-${randomBytes(8).toString('hex')}`;
const SESSION_HEADERS = (id: string) => ({ ...MCP_POST_HEADERS, 'mcp-session-id': id, 'mcp-protocol-version': '2025-06-18' });

describe('a resumed stream and a secret a reload added after its events were sent', () => {
  let broker: HttpBroker;
  beforeAll(async () => {
    broker = await startHttpBroker({ servers: { echo: nodeServer(fixture('echo.mjs'), { required: true }) } });
  });
  afterAll(async () => broker?.close());

  it('replays the events scrubbed with the secrets of now, the answer under its own id', async () => {
    const session = await openRawSession(broker.url);
    const body = { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'echo__echo', arguments: { text: `resume ${LATER}` }, _meta: { progressToken: 'tok' } } };
    const first = await readStream(`${broker.url}/mcp`, { method: 'POST', headers: SESSION_HEADERS(session), body: JSON.stringify(body) }, (t) => t.includes('"result"'));
    // Not a secret yet: sent as it is.
    expect(sseMessages(first.text).find((m) => m.id === 7)?.result.content[0].text).toBe(`resume ${LATER}`);
    const ids = [...first.text.matchAll(/^id: (.+)$/gm)].map((m) => m[1]!);
    expect(ids.length).toBeGreaterThanOrEqual(2);

    const config = JSON.parse(readFileSync(broker.configPath, 'utf8'));
    config.mcpServers.holder = { command: process.execPath, args: ['-e', ''], disabled: true, env: { API_KEY: LATER } };
    const seen = broker.stderr().split('config reloaded').length;
    writeFileSync(broker.configPath, JSON.stringify(config, null, 2));
    await waitFor(() => broker.stderr().split('config reloaded').length > seen, 'config reloaded', 20_000, 50);

    const replay = await readStream(
      `${broker.url}/mcp`,
      { headers: { ...SESSION_HEADERS(session), accept: 'text/event-stream', 'last-event-id': ids[0]! } },
      (t) => t.includes('"result"'),
    );
    expect(replay.status).toBe(200);
    expect(replay.text).not.toContain(LATER);
    expect(sseMessages(replay.text).find((m) => m.id === 7)?.result.content[0].text).toBe('resume [REDACTED]');
  });
});
