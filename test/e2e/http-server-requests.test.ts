/**
 * Upstream→client requests over HTTP with many sessions sharing one upstream connection:
 * upstreams are offered `http.clientCapabilities`; a request reaches the session whose call is
 * in flight only when that session declared the capability. On this stdio upstream one
 * session's calls are in flight at a time: another session's call waits its turn, so a request
 * is never handed to a session it was not made for.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, nodeServer, waitFor } from './helpers.js';
import { connectHttp, startHttpBroker, type HttpBroker } from '../transports/harness.js';

const textOf = (r: unknown) => ((r as { content: { text?: string }[] }).content ?? []).map((c) => c.text ?? '').join('');

describe('upstream requests over HTTP', () => {
  let broker: HttpBroker;

  beforeAll(async () => {
    broker = await startHttpBroker({
      servers: { conf: nodeServer(fixture('conformance-server.mjs'), { args: [fixture('conformance-server.mjs'), '--legacy'] }) },
      extra: { http: { clientCapabilities: { sampling: {}, elicitation: {} } } },
      args: ['--log-level', 'debug'],
    });
  });
  afterAll(async () => broker?.close());

  it('refuses a sampling request for a session that did not declare sampling', async () => {
    const plain = await connectHttp(broker.url, 'streamable', { capabilities: {} });
    try {
      const result = await plain.client.callTool({ name: 'conf__test_sampling', arguments: { prompt: 'x' } });
      expect(textOf(result)).toContain('Sampling not supported or error');
      expect(textOf(result)).toContain('did not declare the "sampling" capability');
    } finally {
      await plain.close();
    }
  });

  it('does not offer roots when http.clientCapabilities leaves them out', async () => {
    const client = await connectHttp(broker.url, 'sse', { capabilities: { roots: {} } });
    try {
      const result = await client.client.callTool({ name: 'conf__test_list_roots', arguments: {} });
      expect(result.isError).toBe(true);
      expect(textOf(result)).toContain('roots/list failed');
    } finally {
      await client.close();
    }
  });

  it("never hands one session's sampling request to another: the second session's call waits for the first one's to end", async () => {
    const a = await connectHttp(broker.url, 'streamable', { capabilities: { sampling: {} } });
    const b = await connectHttp(broker.url, 'sse', { capabilities: { sampling: {} } });
    try {
      let releaseA!: () => void;
      const aHeld = new Promise<void>((r) => (releaseA = r));
      const seenBy: string[] = [];
      a.client.setRequestHandler('sampling/createMessage', async () => {
        seenBy.push('a');
        await aHeld;
        return { role: 'assistant', content: { type: 'text', text: 'answer for a' }, model: 'm' };
      });
      b.client.setRequestHandler('sampling/createMessage', async () => {
        seenBy.push('b');
        return { role: 'assistant', content: { type: 'text', text: 'answer for b' }, model: 'm' };
      });
      const callA = a.client.callTool({ name: 'conf__test_sampling', arguments: { prompt: 'for a' } });
      await waitFor(() => seenBy.includes('a'), "a's sampling request");
      const waits = () => broker.stderr().split('call waits for its turn').length - 1;
      const before = waits();
      const callB = b.client.callTool({ name: 'conf__test_sampling', arguments: { prompt: 'for b' } });
      await waitFor(() => waits() > before, "b's call to wait its turn");
      expect(seenBy).toEqual(['a']);
      releaseA();
      expect(textOf(await callA)).toBe('LLM response: answer for a');
      expect(textOf(await callB)).toBe('LLM response: answer for b');
      expect(seenBy).toEqual(['a', 'b']);
    } finally {
      await a.close();
      await b.close();
    }
  });
});
