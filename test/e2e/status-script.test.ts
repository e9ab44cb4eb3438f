/**
 * The status page's script as the real CLI serves it (`GET /status/app.js`), run in a bare
 * `vm` context with just the browser objects its start touches: a token in `#token=…` that is
 * not percent-encoded (a `%` of the token itself) threw `URIError` from `decodeURIComponent` at
 * the top of the script, so the page never started: no data, no token form, stuck on
 * "connecting…". (The full page is driven in Chromium by status-page.test.ts.)
 */
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, nodeServer } from './helpers.js';
import { http, startHttpBroker, type HttpBroker } from '../transports/harness.js';

const TOKEN = 'pct%token-0123456789abcdef';

/** Runs `script` with `hash` as `location.hash`; answers what it stored, and the headers of each fetch once the page has loaded. */
function runPage(script: string, hash: string): { stored: Map<string, string>; fetched: { url: string; headers: Record<string, string> }[] } {
  const stored = new Map<string, string>();
  const fetched: { url: string; headers: Record<string, string> }[] = [];
  const listeners: Record<string, () => void> = {};
  const element = () => ({ hidden: false, textContent: '', className: '', addEventListener: () => undefined });
  const context = {
    location: { hash, pathname: '/', search: '' },
    history: { replaceState: () => undefined },
    sessionStorage: { getItem: (k: string) => stored.get(k) ?? null, setItem: (k: string, v: string) => void stored.set(k, v) },
    document: { getElementById: element, addEventListener: (type: string, fn: () => void) => void (listeners[type] = fn) },
    fetch: (url: string, init: { headers?: Record<string, string> } = {}) => {
      fetched.push({ url, headers: init.headers ?? {} });
      return new Promise(() => undefined);
    },
    setTimeout,
    setInterval,
  };
  runInNewContext(script, context);
  listeners.DOMContentLoaded?.();
  return { stored, fetched };
}

describe('status page script', () => {
  let broker: HttpBroker;
  beforeAll(async () => {
    broker = await startHttpBroker({ servers: { echo: nodeServer(fixture('echo.mjs')) }, extra: { principals: { alice: { token: TOKEN } } } });
  });
  afterAll(async () => broker?.close());

  it('starts with a #token= that is not percent-encoded, and sends that token as it is', async () => {
    const script = (await http(`${broker.url}/status/app.js`)).text;
    const page = runPage(script, `#token=${TOKEN}`);
    expect(page.stored.get('mcp-broker-token')).toBe(TOKEN);
    expect(page.fetched[0]).toEqual({ url: '/api/v1/status', headers: { Authorization: `Bearer ${TOKEN}` } });
    // That header is alice's.
    expect((await http(`${broker.url}/api/v1/status`, { headers: page.fetched[0]!.headers })).body.viewer.principal).toBe('alice');
    // A percent-encoded one is decoded, as before.
    expect(runPage(script, `#token=${encodeURIComponent(TOKEN)}`).stored.get('mcp-broker-token')).toBe(TOKEN);
  });
});
