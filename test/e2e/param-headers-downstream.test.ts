/**
 * `Mcp-Param-*` headers from a 2026-07-28 HTTP client are checked against the arguments they
 * mirror (spec basic/transports/streamable-http.mdx "Server Behavior for Custom Headers"): the
 * fixture's `region_lookup` marks `region` with `x-mcp-header: Region`. A missing, disagreeing or
 * malformed header is 400 / -32020 and nothing reaches the upstream; a matching one (plain or
 * Base64) is served, on the SDK's path and on the HTTP lane alike. The SDK's own check runs
 * only for an `McpServer`, which the broker's modern instances are not: before, every one of
 * these calls was served.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { fixture, nodeServer, readNdjson } from './helpers.js';
import { MCP_POST_HEADERS, startHttpBroker } from '../transports/harness.js';

const dir = mkdtempSync(join(tmpdir(), 'mcp-broker-param-headers-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const MODERN = '2026-07-28';
const envelope = {
  'io.modelcontextprotocol/protocolVersion': MODERN,
  'io.modelcontextprotocol/clientInfo': { name: 'param-headers', version: '1' },
  'io.modelcontextprotocol/clientCapabilities': {},
};
const b64 = (text: string) => `=?base64?${Buffer.from(text, 'utf8').toString('base64')}?=`;

/** One 2026-07-28 `tools/call` of `md__region_lookup` over HTTP with `headers`; its status and JSON-RPC body. */
const caller = (url: string) => async (id: string, args: Record<string, unknown>, headers: Record<string, string | undefined>) => {
  const res = await fetch(`${url}/mcp`, {
    method: 'POST',
    headers: Object.fromEntries(
      Object.entries({ ...MCP_POST_HEADERS, 'mcp-protocol-version': MODERN, 'mcp-method': 'tools/call', 'mcp-name': 'md__region_lookup', ...headers }).filter(
        (entry): entry is [string, string] => entry[1] !== undefined,
      ),
    ),
    body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'md__region_lookup', arguments: args, _meta: envelope } }),
  });
  const text = await res.text();
  const body = (text.startsWith('{') ? JSON.parse(text) : JSON.parse(text.split('\n').find((l) => l.startsWith('data: {'))!.slice(6))) as {
    result?: { content?: Array<{ text: string }>; isError?: boolean };
    error?: { code: number; message: string; data?: { mismatch?: { header: string } } };
  };
  return { status: res.status, body };
};

describe('Mcp-Param-* headers checked downstream (2026-07-28 HTTP)', () => {
  it('missing, disagreeing or malformed: 400 / -32020, nothing sent upstream; matching (plain or Base64): served', async () => {
    const log = join(dir, 'fixture.ndjson');
    const broker = await startHttpBroker({ servers: { md: nodeServer(fixture('modern-upstream.mjs'), { env: { FIXTURE_LOG: log } }) } });
    try {
      const call = caller(broker.url);
      const calls = () => (existsSync(log) ? readNdjson<{ event: string; tool?: string }>(log).filter((e) => e.event === 'call' && e.tool === 'region_lookup').length : 0);

      // Served twice: the first by the SDK's per-request instance, the second by the HTTP lane (the envelope is known then).
      for (const id of ['ok-sdk', 'ok-lane']) {
        const ok = await call(id, { region: 'eu-west' }, { 'mcp-param-region': 'eu-west' });
        expect(ok.status, id).toBe(200);
        expect(ok.body.error, id).toBeUndefined();
      }
      const encoded = await call('ok-b64', { region: 'zürich' }, { 'mcp-param-region': b64('zürich') });
      expect(encoded.status).toBe(200);
      expect(encoded.body.error).toBeUndefined();
      const served = calls();
      expect(served).toBe(3);

      for (const [id, args, header] of [
        ['missing', { region: 'eu-west' }, undefined],
        ['other', { region: 'eu-west' }, 'us-east'],
        ['bad-b64', { region: 'eu-west' }, '=?base64?not*base64?='],
        ['raw non-ascii', { region: 'zürich' }, 'zürich'],
      ] as const) {
        const refused = await call(id, args, { 'mcp-param-region': header });
        expect(refused.status, id).toBe(400);
        expect(refused.body.error?.code, id).toBe(-32020);
        expect(refused.body.error?.data?.mismatch?.header, id).toBe('Mcp-Param-Region');
      }
      // An argument left out expects no header, and a header of it is ignored.
      const absent = await call('absent', {}, { 'mcp-param-region': 'anything' });
      expect(absent.body.error?.code).not.toBe(-32020);
      expect(calls()).toBe(served + 1);
    } finally {
      await broker.close();
    }
  }, 60_000);

  it('a tool the caller may not see: the call is denied as any call to it, never -32020 (the check tells nothing about its arguments)', async () => {
    const log = join(dir, 'fixture-hidden.ndjson');
    const broker = await startHttpBroker({
      servers: { md: nodeServer(fixture('modern-upstream.mjs'), { env: { FIXTURE_LOG: log } }) },
      extra: { policy: { rules: [{ tools: ['md__region_lookup'], action: 'deny' }] } },
    });
    try {
      const call = caller(broker.url);
      const hidden = await call('hidden', { region: 'eu-west' }, { 'mcp-param-region': undefined });
      expect(hidden.body.error?.code).not.toBe(-32020);
      expect(JSON.stringify(hidden.body)).toMatch(/denied/);
      const served = existsSync(log) ? readNdjson<{ event: string; tool?: string }>(log).filter((e) => e.event === 'call' && e.tool === 'region_lookup').length : 0;
      expect(served).toBe(0);
    } finally {
      await broker.close();
    }
  }, 60_000);
});
