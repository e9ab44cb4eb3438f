/**
 * Issue 12 (fail closed everywhere), unbounded sessions and streams, over the real CLI: sessions
 * capped per principal and in all (the oldest idle one ends to make room, else 429 / 503),
 * event streams (`GET /sse`, `GET /mcp`, `GET /api/v1/events`) capped the same way, and the
 * server's header and request timeouts set from the config.
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, nodeServer, waitFor } from './helpers.js';
import { http, initializeBody, MCP_POST_HEADERS, openRawSession, startHttpBroker, type HttpBroker } from '../transports/harness.js';

const TOKENS = {
  ALICE_TOKEN: 'alice-token-0123456789abcdef',
  BOB_TOKEN: 'bob-token-0123456789abcdef00',
  CAROL_TOKEN: 'carol-token-0123456789abcdef',
};
const PRINCIPALS = {
  alice: { token: '${env:ALICE_TOKEN}' },
  bob: { token: '${env:BOB_TOKEN}' },
  carol: { token: '${env:CAROL_TOKEN}' },
};
const auth = (token: string) => ({ authorization: `Bearer ${token}` });
const sessionHeaders = (token: string, id: string) => ({ ...MCP_POST_HEADERS, ...auth(token), 'mcp-session-id': id, 'mcp-protocol-version': '2025-06-18' });
const toolsList = { jsonrpc: '2.0', id: 2, method: 'tools/list' };

/** An open streaming GET: its status, and a way to close it; a refused one carries its JSON body. */
interface OpenStream {
  status: number;
  body?: any;
  close(): void;
}

async function openStream(url: string, headers: Record<string, string>): Promise<OpenStream> {
  const aborter = new AbortController();
  const res = await fetch(url, { headers: { accept: 'text/event-stream', ...headers }, signal: aborter.signal });
  if (res.headers.get('content-type')?.startsWith('application/json')) {
    const body = await res.json();
    return { status: res.status, body, close: () => undefined };
  }
  // Keep the body flowing so the stream stays open; it ends on close().
  void res.body?.pipeTo(new WritableStream()).catch(() => undefined);
  return { status: res.status, close: () => aborter.abort() };
}

/** A session's status: 200 when it serves `tools/list`, 404 when it is gone. */
async function sessionStatus(url: string, token: string, id: string): Promise<number> {
  const res = await fetch(`${url}/mcp`, { method: 'POST', headers: sessionHeaders(token, id), body: JSON.stringify(toolsList) });
  await res.body?.cancel();
  return res.status;
}

async function initialize(url: string, token: string): Promise<{ status: number; body: any }> {
  const res = await http(`${url}/mcp`, { headers: { ...MCP_POST_HEADERS, ...auth(token) }, body: initializeBody() });
  return { status: res.status, body: res.body };
}

describe('issue 12: HTTP sessions are capped per principal and in all', () => {
  let broker: HttpBroker;

  beforeAll(async () => {
    broker = await startHttpBroker({
      servers: { echo: nodeServer(fixture('echo.mjs')) },
      extra: { principals: PRINCIPALS, http: { maxSessionsPerPrincipal: 3, maxSessions: 4 } },
      env: TOKENS,
    });
  });
  afterAll(async () => broker?.close());

  /** Ends sessions with DELETE, so each test starts from an empty table. */
  async function deleteAll(token: string, ids: string[]): Promise<void> {
    for (const id of ids) await fetch(`${broker.url}/mcp`, { method: 'DELETE', headers: sessionHeaders(token, id) }).then((r) => r.body?.cancel());
  }

  it('the 4th session of a principal ends its oldest idle one: that id then gets 404, the others serve', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push(await openRawSession(broker.url, auth(TOKENS.ALICE_TOKEN)));
    const fourth = await openRawSession(broker.url, auth(TOKENS.ALICE_TOKEN));
    expect(await sessionStatus(broker.url, TOKENS.ALICE_TOKEN, ids[0]!)).toBe(404);
    for (const id of [ids[1]!, ids[2]!, fourth]) expect(await sessionStatus(broker.url, TOKENS.ALICE_TOKEN, id)).toBe(200);
    await waitFor(() => new RegExp(`"session":"${ids[0]!.slice(0, 8)}"[^\\n]*"reason":"evicted"`).test(broker.stderr()), 'the eviction log line');
    await deleteAll(TOKENS.ALICE_TOKEN, [ids[1]!, ids[2]!, fourth]);
  });

  it('a principal whose sessions are all busy gets 429 naming http.maxSessionsPerPrincipal; another principal is still served', async () => {
    const ids = [];
    const streams: OpenStream[] = [];
    for (let i = 0; i < 3; i++) {
      const id = await openRawSession(broker.url, auth(TOKENS.ALICE_TOKEN));
      ids.push(id);
      // An open GET stream keeps a session busy: it may not be ended to make room.
      const stream = await openStream(`${broker.url}/mcp`, sessionHeaders(TOKENS.ALICE_TOKEN, id));
      expect(stream.status).toBe(200);
      streams.push(stream);
    }
    try {
      const refused = await initialize(broker.url, TOKENS.ALICE_TOKEN);
      expect(refused.status).toBe(429);
      expect(refused.body.error.code).toBe(-32000);
      expect(refused.body.error.message).toMatch(/http\.maxSessionsPerPrincipal/);
      expect(refused.body.error.message).not.toMatch(/alice/);
      for (const id of ids) expect(await sessionStatus(broker.url, TOKENS.ALICE_TOKEN, id)).toBe(200);
      const bob = await openRawSession(broker.url, auth(TOKENS.BOB_TOKEN));
      expect(await sessionStatus(broker.url, TOKENS.BOB_TOKEN, bob)).toBe(200);
      await deleteAll(TOKENS.BOB_TOKEN, [bob]);
    } finally {
      for (const s of streams) s.close();
      await deleteAll(TOKENS.ALICE_TOKEN, ids);
    }
  });

  it('past http.maxSessions the oldest idle session of anyone ends, and a new one gets 503 when none is idle', async () => {
    const alice = [];
    const streams: OpenStream[] = [];
    for (let i = 0; i < 3; i++) {
      const id = await openRawSession(broker.url, auth(TOKENS.ALICE_TOKEN));
      alice.push(id);
      streams.push(await openStream(`${broker.url}/mcp`, sessionHeaders(TOKENS.ALICE_TOKEN, id)));
    }
    try {
      const bob = await openRawSession(broker.url, auth(TOKENS.BOB_TOKEN));
      // Four sessions in all: carol's takes the place of bob's, the only idle one.
      const carol = await openRawSession(broker.url, auth(TOKENS.CAROL_TOKEN));
      expect(await sessionStatus(broker.url, TOKENS.BOB_TOKEN, bob)).toBe(404);
      streams.push(await openStream(`${broker.url}/mcp`, sessionHeaders(TOKENS.CAROL_TOKEN, carol)));
      const refused = await initialize(broker.url, TOKENS.BOB_TOKEN);
      expect(refused.status).toBe(503);
      expect(refused.body.error.message).toMatch(/http\.maxSessions\b/);
      for (const id of alice) expect(await sessionStatus(broker.url, TOKENS.ALICE_TOKEN, id)).toBe(200);
      expect(await sessionStatus(broker.url, TOKENS.CAROL_TOKEN, carol)).toBe(200);
      await deleteAll(TOKENS.CAROL_TOKEN, [carol]);
    } finally {
      for (const s of streams) s.close();
      await deleteAll(TOKENS.ALICE_TOKEN, alice);
    }
  });
});

describe('issue 12: event streams are capped per principal and in all', () => {
  let broker: HttpBroker;

  beforeAll(async () => {
    broker = await startHttpBroker({
      servers: { echo: nodeServer(fixture('echo.mjs')) },
      extra: { principals: PRINCIPALS, http: { maxStreamsPerPrincipal: 2, maxStreams: 3 } },
      env: TOKENS,
    });
  });
  afterAll(async () => broker?.close());

  it('GET /sse and GET /api/v1/events past http.maxStreamsPerPrincipal get 429; past http.maxStreams 503; a closed stream frees its place', async () => {
    const open: OpenStream[] = [];
    try {
      for (let i = 0; i < 2; i++) {
        const s = await openStream(`${broker.url}/sse`, auth(TOKENS.ALICE_TOKEN));
        expect(s.status).toBe(200);
        open.push(s);
      }
      const sse = await openStream(`${broker.url}/sse`, auth(TOKENS.ALICE_TOKEN));
      expect(sse.status).toBe(429);
      expect(sse.body.error.message).toMatch(/http\.maxStreamsPerPrincipal/);
      const events = await openStream(`${broker.url}/api/v1/events`, auth(TOKENS.ALICE_TOKEN));
      expect(events.status).toBe(429);
      const bob = await openStream(`${broker.url}/api/v1/events`, auth(TOKENS.BOB_TOKEN));
      expect(bob.status).toBe(200);
      open.push(bob);
      const carol = await openStream(`${broker.url}/sse`, auth(TOKENS.CAROL_TOKEN));
      expect(carol.status).toBe(503);
      expect(carol.body.error.message).toMatch(/http\.maxStreams\b/);
      // The refused GET /sse opened no session: its stream cap was checked first.
      expect(broker.stderr()).not.toMatch(/"principal":"carol"[^\n]*"http session opened"/);
      open.shift()!.close();
      const again = await waitFor(async () => {
        const s = await openStream(`${broker.url}/sse`, auth(TOKENS.ALICE_TOKEN));
        return s.status === 200 ? s : undefined;
      }, 'a place freed by the closed stream');
      open.push(again);
    } finally {
      for (const s of open) s.close();
    }
  });

  it('a GET /mcp stream counts too: the third of a principal gets 429, its session is not touched', async () => {
    const ids = [await openRawSession(broker.url, auth(TOKENS.ALICE_TOKEN)), await openRawSession(broker.url, auth(TOKENS.ALICE_TOKEN))];
    const third = await openRawSession(broker.url, auth(TOKENS.ALICE_TOKEN));
    // The previous test's streams may take a moment to be seen closed.
    const open: OpenStream[] = [];
    try {
      for (const id of ids) {
        const s = await waitFor(async () => {
          const stream = await openStream(`${broker.url}/mcp`, sessionHeaders(TOKENS.ALICE_TOKEN, id));
          return stream.status === 200 ? stream : undefined;
        }, 'a GET /mcp stream');
        open.push(s);
      }
      const refused = await openStream(`${broker.url}/mcp`, sessionHeaders(TOKENS.ALICE_TOKEN, third));
      expect(refused.status).toBe(429);
      expect(refused.body.error.message).toMatch(/http\.maxStreamsPerPrincipal/);
      expect(await sessionStatus(broker.url, TOKENS.ALICE_TOKEN, third)).toBe(200);
    } finally {
      for (const s of open) s.close();
    }
  });
});

describe('issue 12: the server header and request timeouts are set from the config', () => {
  let broker: HttpBroker;

  beforeAll(async () => {
    broker = await startHttpBroker({
      servers: { echo: nodeServer(fixture('echo.mjs')) },
      extra: { http: { headersTimeoutMs: 400, requestTimeoutMs: 800, keepAliveMs: 200 } },
    });
  });
  afterAll(async () => broker?.close());

  /** Writes `text` on a raw connection and resolves with what the server sent before it closed the connection. */
  function sendAndWaitForClose(text: string): Promise<string> {
    const u = new URL(broker.url);
    return new Promise((resolve, reject) => {
      const socket = connect(Number(u.port), u.hostname, () => socket.write(text));
      let got = '';
      socket.setEncoding('utf8');
      socket.on('data', (chunk: string) => (got += chunk));
      socket.on('error', reject);
      socket.on('close', () => resolve(got));
    });
  }

  it('headers that never end get 408 and the connection closed (http.headersTimeoutMs)', async () => {
    const answer = await sendAndWaitForClose('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ');
    expect(answer).toMatch(/^HTTP\/1\.1 408/);
  });

  it('a body that never ends gets 408 and the connection closed (http.requestTimeoutMs)', async () => {
    const head = `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n`;
    const answer = await sendAndWaitForClose(`${head}{"jsonrpc":`);
    expect(answer).toMatch(/^HTTP\/1\.1 408/);
  });

  it('a stream open longer than http.requestTimeoutMs is not cut', async () => {
    const aborter = new AbortController();
    const started = Date.now();
    const res = await fetch(`${broker.url}/sse`, { headers: { accept: 'text/event-stream' }, signal: aborter.signal });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    try {
      // Keep-alive comments every 200 ms: read until well past the request timeout.
      while (Date.now() - started < 2000) {
        const next = await reader.read();
        if (next.done) break;
        text += decoder.decode(next.value, { stream: true });
      }
      expect(Date.now() - started).toBeGreaterThanOrEqual(2000);
      expect(text).toContain(': keepalive');
    } finally {
      aborter.abort();
      await reader.cancel().catch(() => undefined);
    }
  });
});
