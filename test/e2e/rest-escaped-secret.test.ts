/**
 * A REST upstream that echoes its API key in a JSON body written with `/` escaped as `\/` (PHP's
 * `json_encode` by default): the text block the broker passes on is the body as it came, and the
 * key in it was not recognised in that spelling (found by a review hunting for paths around the
 * scrubber). Neither the text block nor the structured content may carry the key now.
 */
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readNdjson, spawnRawBroker, type RawBroker } from './helpers.js';

const KEY = 'Zq8/rT4+kL2/vN6xW0pQ3yH5';

describe('a REST body echoing the key with "/" escaped', () => {
  let api: Server;
  let broker: RawBroker;
  beforeAll(async () => {
    api = createServer((req, res) => {
      const seen = String(req.headers['x-api-key'] ?? '');
      res.setHeader('content-type', 'application/json');
      res.end(`{"seen":"${seen.replaceAll('/', '\\/')}"}`);
    });
    await new Promise<void>((resolve) => api.listen(0, '127.0.0.1', () => resolve()));
    const port = (api.address() as { port: number }).port;
    broker = spawnRawBroker({
      servers: { api: { type: 'rest', baseUrl: `http://127.0.0.1:${port}`, headers: { 'X-Api-Key': '${env:HUNT_KEY}' }, tools: { whoami: { path: '/whoami' } } } },
      env: { HUNT_KEY: KEY },
    });
    await broker.initialize({});
  });
  afterAll(async () => {
    await broker?.close();
    await new Promise((resolve) => api?.close(resolve));
  });

  it('the text block and the structured content carry [REDACTED]; the key in no spelling reaches the client or the record', async () => {
    const reply = (await broker.request(1, 'tools/call', { name: 'api__whoami', arguments: {} }, 20_000)) as { result: { content: Array<{ text: string }>; structuredContent?: unknown } };
    const text = reply.result.content[0]!.text;
    expect(JSON.parse(text).seen).toBe('[REDACTED]');
    const wire = JSON.stringify(reply);
    for (const spelling of [KEY, KEY.replaceAll('/', '\\/'), 'rT4+kL2']) expect(wire).not.toContain(spelling);
    expect(JSON.stringify(readNdjson(broker.recordsPath))).not.toContain('rT4+kL2');
  });
});
