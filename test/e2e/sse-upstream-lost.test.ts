/**
 * A legacy SSE upstream whose event stream ends (a server restart, a proxy's idle timeout) has
 * lost its server session. The SDK's transport reconnected on its own to a new session it never
 * initialized: the calls in flight waited out their deadline (`timeout`), and every later call
 * went to the uninitialized session (`upstream_error: session not initialized`, until someone
 * ran `broker__reconnect`). Now the calls in flight fail at once and the upstream is dialled
 * again, with an `initialize` (src/upstream/sse-session-guard.ts).
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { describe, expect, it } from 'vitest';
import { fixture, spawnRawBroker, waitFor } from './helpers.js';

type Answer = { result?: { content?: { text: string }[]; _meta?: Record<string, unknown> }; error?: { code: number } };
const outcome = (a: Answer) => a.result?._meta?.['mcp-broker/outcome'];

describe('a legacy SSE upstream whose event stream ends', () => {
  it('fails the calls in flight at once (they waited for the deadline) and is dialled again with an initialize (later calls met an uninitialized session)', async () => {
    const upstream = spawn(process.execPath, [fixture('sse-drop.mjs')], { stdio: ['pipe', 'pipe', 'inherit'] });
    try {
      const port = await new Promise<number>((resolve, reject) => {
        createInterface({ input: upstream.stdout! }).once('line', (line) => resolve((JSON.parse(line) as { port: number }).port));
        upstream.once('exit', () => reject(new Error('fixture exited')));
      });
      const broker = spawnRawBroker({ servers: { s: { type: 'sse', url: `http://127.0.0.1:${port}/sse`, timeoutMs: 60_000 } } });
      try {
        await broker.initialize();
        expect(((await broker.request('before', 'tools/call', { name: 's__ok', arguments: {} })) as Answer).result?.content?.[0]?.text).toBe('ok on s1');
        const hang = broker.request('hang', 'tools/call', { name: 's__hang', arguments: {} }, 30_000) as Promise<Answer>;
        const drop = broker.request('drop', 'tools/call', { name: 's__drop', arguments: {} }, 30_000) as Promise<Answer>;
        // Long before the 60 s deadline: the lost connection fails them.
        for (const answer of await Promise.all([hang, drop])) expect(outcome(answer)).toBe('upstream_error');
        // Dialled again: a new session, initialized.
        const again = await waitFor(async () => {
          const a = (await broker.request(`after-${Date.now()}`, 'tools/call', { name: 's__ok', arguments: {} }, 10_000)) as Answer;
          return a.result?.content?.[0]?.text?.startsWith('ok on ') ? a : undefined;
        }, 'a call served after the re-dial', 20_000);
        expect(again.result?.content?.[0]?.text).not.toBe('ok on s1');
        expect(JSON.stringify(broker.messages)).not.toContain('session not initialized');
      } finally {
        await broker.close();
      }
    } finally {
      upstream.kill();
    }
  }, 60_000);
});
