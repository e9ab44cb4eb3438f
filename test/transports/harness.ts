/**
 * Test harness of the HTTP face: spawns the built CLI with `--transport http --port 0`, waits
 * for its "serving http://…" line, and connects SDK clients over Streamable HTTP (`/mcp`) or
 * legacy SSE (`/sse`). Reuses `writeConfig` and friends from test/e2e/helpers.ts.
 * Build first (`npx tsc -p .`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { Client, SSEClientTransport, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import type { Transport, ClientCapabilities } from '@modelcontextprotocol/client';
import { CLI, readNdjson, waitFor, writeConfig, type RecordLine, type SeenNotification } from '../e2e/helpers.js';

export interface HttpBroker {
  /** `http://127.0.0.1:PORT` */
  url: string;
  child: ChildProcess;
  dir: string;
  configPath: string;
  recordsPath: string;
  records(): RecordLine[];
  stderr(): string;
  /** Resolves with the exit code (or signal) once the process exited. */
  exited: Promise<number | string>;
  /** SIGTERM, wait (SIGKILL after 10 s), remove the temp folder. Idempotent. */
  close(): Promise<void>;
}

export interface HttpBrokerOptions {
  servers: Record<string, unknown>;
  extra?: Record<string, unknown>;
  env?: Record<string, string>;
  /** Extra CLI arguments (e.g. `--host`). */
  args?: string[];
}

/** Spawns the CLI serving HTTP on a free port; resolves once it is listening. */
export async function startHttpBroker(options: HttpBrokerOptions): Promise<HttpBroker> {
  const { dir, configPath, recordsPath } = writeConfig(options.servers, options.extra);
  const child = spawn(process.execPath, [CLI, '--config', configPath, '--transport', 'http', '--port', '0', ...(options.args ?? [])], {
    cwd: dir,
    env: { ...process.env, ...(options.env ?? {}) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr!.on('data', (chunk: Buffer) => (err += chunk.toString('utf8')));
  child.stdout!.resume();
  const exited = new Promise<number | string>((res) => child.once('exit', (code, signal) => res(code ?? signal ?? -1)));
  let done = false;
  void exited.then(() => (done = true));
  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      if (!done) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
      rmSync(dir, { recursive: true, force: true });
    })());
  try {
    const url = await waitFor(
      () => {
        if (done) throw new Error(`broker exited before serving:\n${err}`);
        return /serving (http:\/\/[0-9.:[\]]+)\/mcp/.exec(err)?.[1];
      },
      'the broker to serve http',
      30_000,
    );
    return { url, child, dir, configPath, recordsPath, records: () => readNdjson(recordsPath), stderr: () => err, exited, close };
  } catch (e) {
    await close();
    throw e;
  }
}

export type HttpKind = 'streamable' | 'sse';

export interface ConnectedClient {
  client: Client;
  transport: Transport;
  notifications: SeenNotification[];
  close(): Promise<void>;
}

/** Connects an SDK client to a running HTTP broker over Streamable HTTP or legacy SSE. */
export async function connectHttp(
  url: string,
  kind: HttpKind,
  options: { token?: string; capabilities?: ClientCapabilities; headers?: Record<string, string> } = {},
): Promise<ConnectedClient> {
  const headers: Record<string, string> = { ...(options.headers ?? {}) };
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  const transport: Transport =
    kind === 'streamable'
      ? new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers } })
      : new SSEClientTransport(new URL(`${url}/sse`), {
          requestInit: { headers },
          eventSourceInit: { fetch: (u, init) => fetch(u, { ...init, headers: { ...(init?.headers as Record<string, string>), ...headers } }) },
        });
  const client = new Client({ name: `test-${kind}`, version: '1.0.0' }, { capabilities: options.capabilities ?? {} });
  const notifications: SeenNotification[] = [];
  client.fallbackNotificationHandler = async (n) => {
    notifications.push({ method: n.method, params: n.params as Record<string, unknown> | undefined });
  };
  await client.connect(transport, { timeout: 20_000 });
  return {
    client,
    transport,
    notifications,
    close: async () => {
      if (transport instanceof StreamableHTTPClientTransport) await transport.terminateSession().catch(() => undefined);
      await client.close().catch(() => undefined);
    },
  };
}

/** `fetch` with a JSON body; returns status, headers and the parsed body (or text). */
export async function http(
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: unknown; rawBody?: string } = {},
): Promise<{ status: number; headers: Headers; body: any; text: string }> {
  const headers: Record<string, string> = { ...(init.headers ?? {}) };
  let body: string | undefined = init.rawBody;
  if (init.body !== undefined) {
    body = JSON.stringify(init.body);
    headers['content-type'] ??= 'application/json';
  }
  const res = await fetch(url, { method: init.method ?? (body === undefined ? 'GET' : 'POST'), headers, body });
  const text = await res.text();
  let parsed: unknown = undefined;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  return { status: res.status, headers: res.headers, body: parsed, text };
}

/** Headers a Streamable HTTP POST needs. */
export const MCP_POST_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

/** A raw `initialize` body. */
export function initializeBody(id: number | string = 1): object {
  return { jsonrpc: '2.0', id, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } };
}

/** The JSON-RPC messages in an SSE response body (`data:` lines). */
export function sseMessages(text: string): any[] {
  return text
    .split('\n')
    .filter((l) => l.startsWith('data:'))
    .map((l) => l.slice(5).trim())
    .filter(Boolean)
    .map((l) => JSON.parse(l));
}

/**
 * A streaming response read as text until `until(text)` holds or `timeoutMs` passes, and left
 * open: `close()` aborts the request and cancels the body (the client drops the stream).
 */
export async function openStream(
  url: string,
  init: RequestInit,
  until: (text: string) => boolean,
  timeoutMs = 10_000,
): Promise<{ status: number; headers: Headers; text: string; close: () => Promise<void> }> {
  const aborter = new AbortController();
  const res = await fetch(url, { ...init, signal: aborter.signal });
  let text = '';
  const reader = res.body?.getReader();
  const close = async () => {
    aborter.abort();
    await reader?.cancel().catch(() => undefined);
  };
  if (!reader) return { status: res.status, headers: res.headers, text, close };
  const decoder = new TextDecoder();
  const deadline = performance.now() + timeoutMs;
  try {
    while (!until(text) && performance.now() < deadline) {
      const next = await Promise.race([
        reader.read(),
        new Promise<{ done: true; value: undefined }>((r) => setTimeout(() => r({ done: true, value: undefined }), Math.max(1, deadline - performance.now()))),
      ]);
      if (next.done) break;
      text += decoder.decode(next.value, { stream: true });
    }
  } catch (err) {
    await close();
    throw err;
  }
  return { status: res.status, headers: res.headers, text, close };
}

/** A streaming response read as text until `until(text)` holds or `timeoutMs` passes, then cancelled. */
export async function readStream(
  url: string,
  init: RequestInit,
  until: (text: string) => boolean,
  timeoutMs = 10_000,
): Promise<{ status: number; headers: Headers; text: string }> {
  const { close, ...read } = await openStream(url, init, until, timeoutMs);
  await close();
  return read;
}

/**
 * `GET /api/v1/events` read as {@link readStream} does; `subscribed` resolves once the broker
 * says the subscription is in place (its `: subscribed` comment), so a test publishes only then.
 */
export function readEvents(
  url: string,
  headers: Record<string, string>,
  until: (text: string) => boolean,
  timeoutMs = 15_000,
): { subscribed: Promise<void>; read: Promise<{ status: number; headers: Headers; text: string }> } {
  let inPlace!: () => void;
  const subscribed = new Promise<void>((resolve) => (inPlace = resolve));
  const read = readStream(`${url}/api/v1/events`, { headers }, (text) => (text.includes(': subscribed') && inPlace(), until(text)), timeoutMs);
  // A stream that ended or failed before subscribing settles `subscribed` too; `read` tells why.
  void read.then(inPlace, inPlace);
  return { subscribed, read };
}

/** Opens a raw Streamable HTTP session (initialize + initialized); returns its id. */
export async function openRawSession(url: string, headers: Record<string, string> = {}): Promise<string> {
  const init = await readStream(
    `${url}/mcp`,
    { method: 'POST', headers: { ...MCP_POST_HEADERS, ...headers }, body: JSON.stringify(initializeBody()) },
    (t) => t.includes('"result"'),
  );
  const id = init.headers.get('mcp-session-id');
  if (init.status !== 200 || !id) throw new Error(`initialize failed: ${init.status} ${init.text}`);
  const ack = await fetch(`${url}/mcp`, {
    method: 'POST',
    headers: { ...MCP_POST_HEADERS, ...headers, 'mcp-session-id': id, 'mcp-protocol-version': '2025-06-18' },
    body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
  });
  if (ack.status !== 202) throw new Error(`initialized got ${ack.status}`);
  return id;
}

/** A request through `node:http`, which (unlike `fetch`) lets a test set any `Host` header. */
export function nodeRequest(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string },
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: options.method ?? 'GET', headers: options.headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    req.end(options.body);
  });
}
