/**
 * End to end through the real CLI (issue 12 item 6, "secrets leak around tools/call"): an
 * upstream given a `${env:}` secret as `API_TOKEN` echoes it into everything it can send toward
 * a client (test/fixtures/leaky.mjs). Every message on the stdio wire is collected; the secret
 * must be in none of them, nor in the records file, nor on stderr. Over HTTP, an unknown tool
 * name holding the secret sent to the admin API must not reach the records or the events stream.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, nodeServer, readNdjson, spawnRawBroker, waitFor, type RawBroker } from './helpers.js';
import { http, readEvents, startHttpBroker, type HttpBroker } from '../transports/harness.js';

const SECRET = `leak-${randomBytes(8).toString('hex')}`;
const REDACTED = '[REDACTED]';
const leaky = () => nodeServer(fixture('leaky.mjs'), { env: { API_TOKEN: '${env:LEAKY_API_TOKEN}' } });
const decode = (b64: string) => Buffer.from(b64, 'base64').toString('utf8');
/** The same bytes as `BINARY` in test/fixtures/leaky.mjs. */
const BINARY = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0xff, 0xfe, 0x00, 0x01]).toString('base64');

type Message = Record<string, any>;

describe('issue 12: nothing an upstream sends around tools/call carries its injected secret (stdio)', () => {
  let broker: RawBroker;
  let id = 0;
  const request = async (method: string, params?: object): Promise<Message> => broker.request(++id, method, params, 20_000);
  const waitForMessage = (pred: (m: Message) => boolean, what: string): Promise<Message> => broker.waitForMessage(pred, what);

  beforeAll(async () => {
    broker = spawnRawBroker({ servers: { leaky: leaky() }, env: { LEAKY_API_TOKEN: SECRET } });
    await broker.initialize({ elicitation: {} });
    await request('logging/setLevel', { level: 'info' });
  });
  afterAll(() => broker?.close());

  it('tools/list: the secret in a tool title, description, inputSchema description and annotations is redacted; the schema still works', async () => {
    const { result } = await request('tools/list');
    const work = result.tools.find((t: Message) => t.name === 'leaky__work');
    expect(JSON.stringify(result)).not.toContain(SECRET);
    expect(work.description).toBe(`works with ${REDACTED}`);
    expect(work.title).toBe(`work title ${REDACTED}`);
    expect(work.annotations.title).toBe(`annotated ${REDACTED}`);
    expect(work.inputSchema.properties.password).toEqual({ type: 'string', description: `like ${REDACTED}` });
  });

  it('progress notifications of a call: their message is scrubbed', async () => {
    const reply = await request('tools/call', { name: 'leaky__work', arguments: {}, _meta: { progressToken: 'progress-1' } });
    expect(reply.result.content[0].text).toBe('done');
    const progress = await waitForMessage((m) => m.method === 'notifications/progress' && m.params?.progressToken === 'progress-1', 'the progress');
    expect(progress.params.message).toBe(`halfway with ${REDACTED}`);
  });

  it('relayed notifications/message: both logger and data are scrubbed', async () => {
    const from = broker.messages.length;
    await request('tools/call', { name: 'leaky__work', arguments: {} });
    const log = await waitForMessage(
      (m) => broker.messages.indexOf(m) >= from && m.method === 'notifications/message' && String(m.params?.data?.note ?? '').startsWith('data '),
      'the relayed log message',
    );
    expect(log.params.data).toEqual({ note: `data ${REDACTED}` });
    expect(log.params.logger).toBe(`logger-${REDACTED}`);
  });

  it('prompts/list and prompts/get: descriptions, messages and embedded text blobs are scrubbed', async () => {
    const list = await request('prompts/list');
    expect(JSON.stringify(list)).not.toContain(SECRET);
    expect(list.result.prompts[0]).toMatchObject({ name: 'leaky__p', description: `prompt about ${REDACTED}`, arguments: [{ name: 'a', description: `argument ${REDACTED}` }] });
    const got = await request('prompts/get', { name: 'leaky__p', arguments: { a: 'x' } });
    expect(JSON.stringify(got)).not.toContain(SECRET);
    expect(got.result.description).toBe(`got ${REDACTED}`);
    expect(got.result.messages[0].content.text).toBe(`message ${REDACTED}`);
    expect(decode(got.result.messages[1].content.resource.blob)).toBe(`prompt blob ${REDACTED}`);
  });

  it('resources/list and resources/templates/list: names and descriptions are scrubbed', async () => {
    const list = await request('resources/list');
    expect(list.result.resources).toEqual([{ uri: 'leaky://doc', name: `doc ${REDACTED}`, description: `about ${REDACTED}`, mimeType: 'text/plain' }]);
    const templates = await request('resources/templates/list');
    expect(templates.result.resourceTemplates).toEqual([{ uriTemplate: 'leaky://t/{id}', name: 't', description: `template ${REDACTED}` }]);
  });

  it('resources/read: text and base64 text blobs are scrubbed, a large read too; a binary blob passes unchanged', async () => {
    const doc = await request('resources/read', { uri: 'leaky://doc' });
    expect(JSON.stringify(doc)).not.toContain(SECRET);
    expect(doc.result.contents[0].text).toBe(`content ${REDACTED}`);
    expect(decode(doc.result.contents[1].blob)).toBe(`blob ${REDACTED}`);
    const big = await request('resources/read', { uri: 'leaky://big' });
    expect(big.result.contents[0].text.endsWith(` ${REDACTED}`)).toBe(true);
    expect(big.result.contents[0].text).not.toContain(SECRET);
    const bin = await request('resources/read', { uri: 'leaky://bin' });
    expect(bin.result.contents[0].blob).toBe(BINARY);
  });

  it('resources/read failure: the JSON-RPC error message and data are scrubbed, the code kept', async () => {
    const failed = await request('resources/read', { uri: 'leaky://fail' });
    // The fixture throws -32002; SDK v2 servers (the fixture's and ours) send -32602 for it on every revision.
    expect(failed.error.code).toBe(-32602);
    expect(JSON.stringify(failed.error)).not.toContain(SECRET);
    expect(failed.error.message).toContain(`cannot read, ${REDACTED}`);
    expect(failed.error.data).toEqual({ uri: 'leaky://fail', why: REDACTED });
  });

  it('completion/complete: values are scrubbed', async () => {
    const done = await request('completion/complete', { ref: { type: 'ref/prompt', name: 'leaky__p' }, argument: { name: 'a', value: 'v' } });
    expect(done.result.completion.values).toEqual([`value-${REDACTED}`, 'plain']);
  });

  it('an elicitation/create an upstream sends during a call: its message and schema descriptions are scrubbed, the schema kept', async () => {
    const pending = request('tools/call', { name: 'leaky__ask', arguments: {} });
    const ask = await waitForMessage((m) => m.method === 'elicitation/create', 'the relayed elicitation');
    broker.send({ jsonrpc: '2.0', id: ask.id, result: { action: 'decline' } });
    expect((await pending).result.content[0].text).toBe('answered decline');
    expect(ask.params.message).toBe(`confirm ${REDACTED}`);
    expect(ask.params.requestedSchema).toEqual({ type: 'object', properties: { password: { type: 'string', description: `like ${REDACTED}` } } });
  });

  it("an upstream cancelling the elicitation it sent: the client's notifications/cancelled carries its reason scrubbed (it was passed on as is)", async () => {
    const from = broker.messages.length;
    const pending = request('tools/call', { name: 'leaky__askcancel', arguments: {} });
    const ask = await waitForMessage((m) => broker.messages.indexOf(m) >= from && m.method === 'elicitation/create', 'the relayed elicitation');
    const cancelled = await waitForMessage((m) => m.method === 'notifications/cancelled' && m.params?.requestId === ask.id, 'the relayed cancellation');
    expect(JSON.stringify(cancelled)).not.toContain(SECRET);
    expect(cancelled.params.reason).toBe(`gave up holding ${REDACTED}`);
    expect((await pending).result.content[0].text).toBe('gave up');
  });

  it('an SVG (text as base64 image data) in a result and in a tool icon: decoded and scrubbed (each passed as it came)', async () => {
    const decoded = (b64: string) => Buffer.from(b64, 'base64').toString('utf8');
    const image = (await request('tools/call', { name: 'leaky__svg', arguments: {} })).result.content[0];
    expect(image.mimeType).toBe('image/svg+xml');
    expect(decoded(image.data)).toBe(`<svg><text>${REDACTED}</text></svg>`);
    const listed = (await request('tools/list', {})).result.tools.find((t: Message) => t.name === 'leaky__svg');
    const src: string = listed.icons[0].src;
    expect(decoded(src.slice(src.indexOf(',') + 1))).toBe(`<svg><text>${REDACTED}</text></svg>`);
  });

  it('a failed call and a large result (raw-bytes lane) carry no secret', async () => {
    const failed = await request('tools/call', { name: 'leaky__fail', arguments: {} });
    expect(failed.result.isError).toBe(true);
    expect(failed.result.content[0].text).toContain(REDACTED);
    const big = await request('tools/call', { name: 'leaky__big', arguments: {} });
    expect(big.result.content[0].text.endsWith(` ${REDACTED}`)).toBe(true);
    expect(JSON.stringify([failed, big])).not.toContain(SECRET);
  });

  it('a failure reason is scrubbed before it is cut: a secret running across the cut leaves no part of itself', async () => {
    const failed = await request('tools/call', { name: 'leaky__longfail', arguments: {} });
    const reason: string = failed.result.content[0].text;
    expect(failed.result.isError).toBe(true);
    expect(reason).toContain(REDACTED);
    expect(reason).not.toContain(SECRET.slice(0, 8));
    const record = readNdjson(broker.recordsPath).find((r) => String(r.name).endsWith('longfail'));
    expect(String(record?.reason)).not.toContain(SECRET.slice(0, 8));
    expect(String(record?.reason).length).toBeLessThanOrEqual(300);
  });

  it("a result's members of the upstream's own and an embedded text blob carry no secret, small and over 16 KiB (raw-bytes lane)", async () => {
    for (const big of [false, true]) {
      const { result } = await request('tools/call', { name: 'leaky__members', arguments: { big } });
      expect(JSON.stringify(result)).not.toContain(SECRET);
      expect(result.toolResult).toBe(`legacy ${REDACTED}`);
      expect(result.debug).toEqual({ note: REDACTED });
      expect(result[`key-${REDACTED}`]).toBe(true);
      expect(decode(result.content[1].resource.blob)).toBe(`blob ${REDACTED}`);
      expect(result.content[0].text).toBe(big ? 'y'.repeat(20_000) : 'clean');
    }
  });

  it('a resources/read of a URI holding the secret (the caller sent it): its record names the URI scrubbed, as a tool call record does', async () => {
    await request('resources/read', { uri: `leaky://t/${SECRET}` });
    const record = await waitFor(() => readNdjson(broker.recordsPath).find((r) => r.kind === 'resource' && String(r.name).startsWith('leaky://t/')), 'the record of the read');
    expect(record.name).toBe(`leaky://t/${REDACTED}`);
    expect(record.subject).toBe(`leaky/leaky://t/${REDACTED}`);
  });

  it('the secret appears nowhere: not on the wire, not in the records, not on stderr', async () => {
    expect(broker.messages.length).toBeGreaterThan(10);
    expect(broker.stdout().toString('utf8')).not.toContain(SECRET);
    // base64 spellings (blobs) decoded as well
    const blobs = JSON.stringify(broker.messages).match(/"blob":"[^"]*"/g) ?? [];
    for (const b of blobs) expect(decode(b.slice(8, -1))).not.toContain(SECRET);
    expect(readNdjson(broker.recordsPath).length).toBeGreaterThanOrEqual(4);
    expect(JSON.stringify(readNdjson(broker.recordsPath))).not.toContain(SECRET);
    expect(broker.stderr()).not.toContain(SECRET);
  });
});

describe('issue 12: an unknown tool name holding a secret, sent to the admin API, is scrubbed from records and events', () => {
  const ALICE = { authorization: 'Bearer alice-scrub-token-0123456789' };
  let broker: HttpBroker;

  beforeAll(async () => {
    broker = await startHttpBroker({
      servers: { leaky: leaky() },
      extra: { principals: { alice: { token: '${env:ALICE_TOKEN}' } } },
      env: { LEAKY_API_TOKEN: SECRET, ALICE_TOKEN: 'alice-scrub-token-0123456789' },
    });
  });
  afterAll(async () => broker?.close());

  it('POST /api/v1/mcp/call with an unknown subject holding the secret: its answer, record and event carry [REDACTED]', async () => {
    const events = readEvents(broker.url, ALICE, (t) => t.includes('event: record'));
    await events.subscribed;
    const answer = await http(`${broker.url}/api/v1/mcp/call`, { headers: ALICE, body: { subject: `nope-${SECRET}`, args: {} } });
    expect(answer.status).toBe(404);
    expect(answer.body.outcome).toBe('unregistered');
    expect(answer.text).not.toContain(SECRET);
    const record = await waitFor(() => broker.records().find((r) => r.callId === answer.body.callId), 'the record');
    expect(record.name).toBe(`nope-${REDACTED}`);
    expect(record.subject).toBe(`?/nope-${REDACTED}`);
    expect(JSON.stringify(broker.records())).not.toContain(SECRET);
    const stream = await events.read;
    expect(stream.text).toContain(answer.body.callId);
    expect(stream.text).not.toContain(SECRET);
    expect(broker.stderr()).not.toContain(SECRET);
  });
});
