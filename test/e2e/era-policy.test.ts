/**
 * The broker path is the same for both eras (issue 13 §2): a modern (2026-07-28) call is judged
 * and recorded as a legacy one is: a `deny` never reaches the upstream, an `ask` toward a modern
 * client that declared no elicitation (so no input request can ask it) is `approval_required`;
 * both are recorded with `sessionId: null`. The input-request round is test/e2e/ask-modern.test.ts.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { afterAll, describe, expect, it } from 'vitest';
import { brokerUpstream, callsOf } from './broker-support.js';
import { CLI, readNdjson, writeConfig } from './helpers.js';

const tmp = mkdtempSync(join(tmpdir(), 'mcp-broker-era-policy-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('policy for modern callers', () => {
  it('deny never reaches the upstream and ask is approval_required; both recorded without a session', async () => {
    const log = join(tmp, 'fx.log');
    const { dir, configPath, recordsPath } = writeConfig(
      { fx: brokerUpstream() },
      { policy: { rules: [{ tools: ['fx__write'], action: 'deny' }, { tools: ['fx__leak'], action: 'ask' }] } },
    );
    const client = new Client({ name: 'era-policy', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    try {
      await client.connect(
        new StdioClientTransport({ command: process.execPath, args: [CLI, '--config', configPath], cwd: dir, stderr: 'ignore', env: { ...(process.env as Record<string, string>), FIXTURE_LOG: log } }),
        { timeout: 30_000 },
      );
      expect(client.getProtocolEra()).toBe('modern');
      const outcome = (r: unknown) => (r as { _meta?: Record<string, unknown> })._meta?.['mcp-broker/outcome'];
      const denied = await client.callTool({ name: 'fx__write', arguments: { text: 'x' } });
      expect(outcome(denied)).toBe('denied');
      expect(denied.isError).toBe(true);
      const asked = await client.callTool({ name: 'fx__leak', arguments: {} });
      expect(outcome(asked)).toBe('approval_required');
      expect(callsOf(log, 'write')).toBe(0);
      expect(callsOf(log, 'leak')).toBe(0);
      const records = readNdjson(recordsPath);
      expect(records.map((r) => [r.name, r.outcome, r.sessionId, r.unit])).toEqual([
        ['fx__write', 'denied', null, 'modern:local'],
        ['fx__leak', 'approval_required', null, 'modern:local'],
      ]);
    } finally {
      await client.close().catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
