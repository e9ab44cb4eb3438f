/**
 * Requests an upstream makes of the client during a call (`roots/list`, `sampling/createMessage`,
 * `elicitation/create`) that are malformed on either side of the relay, driven by a raw upstream
 * (test/fixtures/raw-asker.mjs) that sends what no SDK server would and logs every answer it gets.
 */
import { join } from 'node:path';
import type { CallToolResult } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it } from 'vitest';
import { fixture, nodeServer, readNdjson, startBroker, type StartedBroker } from './helpers.js';

/** One answer the fixture got to a request it sent to the client. */
interface Answer {
  event: 'answer';
  id: string;
  message: { id: string; result?: unknown; error?: { code: number; message: string } };
}

const servers = { raw: nodeServer(fixture('raw-asker.mjs'), { env: { FIXTURE_LOG: '${configDir}/raw.log' } }) };
const answers = (broker: StartedBroker) => readNdjson<Answer>(join(broker.dir, 'raw.log')).filter((e) => e.event === 'answer');

let broker: StartedBroker | undefined;
afterEach(async () => broker?.close());

describe('an upstream request to the client whose params is no object', () => {
  it('is answered -32602 at once (it was dropped unanswered: the upstream waited out the call); the broker keeps serving', async () => {
    // A deadline the test would wait out should the request go unanswered.
    broker = await startBroker({ servers, capabilities: { roots: {}, sampling: {}, elicitation: {} }, extra: { broker: { timeoutMs: 60_000 } } });
    broker.client.setRequestHandler('roots/list', async () => ({ roots: [{ uri: 'file:///tmp' }] }));
    for (const [method, params] of [['roots/list', 5], ['sampling/createMessage', 'text'], ['elicitation/create', [1]]] as const) {
      const result = (await broker.client.callTool({ name: 'raw__ask', arguments: { method, params } }, { timeout: 20_000 })) as CallToolResult;
      const answer = JSON.parse((result.content[0] as { text: string }).text) as Answer['message'];
      expect(answer.error?.code, method).toBe(-32602);
      expect(answer.result, method).toBeUndefined();
    }
    expect(answers(broker)).toHaveLength(3);
    // The same upstream's well-formed request is still relayed and answered.
    const ok = (await broker.client.callTool({ name: 'raw__ask', arguments: { method: 'roots/list' } }, { timeout: 20_000 })) as CallToolResult;
    expect(JSON.parse((ok.content[0] as { text: string }).text)).toMatchObject({ result: { roots: [{ uri: 'file:///tmp' }] } });
  }, 60_000);
});
