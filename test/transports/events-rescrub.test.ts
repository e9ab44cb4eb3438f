/**
 * `GET /api/v1/events` wrote each published record as it was built. A record is scrubbed when it
 * is built, with the secrets known then; one built before a reload added a secret and published
 * after it was streamed with the value, and a `tool=` pattern matched against its name as built
 * told the value. Now each record streamed is scrubbed with the secrets of now and filtered as
 * shown. A real gateway serving HTTP in this process; the record published by hand, as the
 * publish stage would hand it over.
 */
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import type { CallRecord } from '../../src/broker/types.js';
import { serveInProcess, type InProcessHttp } from './in-process.js';

const LATER = `later-${randomBytes(8).toString('hex')}`;

/** The stream of `GET /api/v1/events<query>`, read as it comes, once subscribed. */
async function events(url: string, query = '') {
  const aborter = new AbortController();
  const res = await fetch(`${url}/api/v1/events${query}`, { signal: aborter.signal });
  expect(res.status).toBe(200);
  let text = '';
  void (async () => {
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    for (;;) {
      const { value, done } = await reader.read().catch(() => ({ value: undefined, done: true as const }));
      if (done) return;
      text += decoder.decode(value, { stream: true });
    }
  })();
  await expect.poll(() => text, { timeout: 5_000 }).toContain(': subscribed');
  return { text: () => text, close: () => aborter.abort() };
}

const built = (callId: string, name: string): CallRecord => ({
  ts: new Date().toISOString(),
  callId,
  sessionId: null,
  principal: 'local',
  unit: 'api:local',
  subject: `?/${name}`,
  name,
  outcome: 'ok',
  status: 200,
  durationMs: 1,
  attempts: 1,
  bytesOut: 1,
  args: { text: LATER },
});

describe('GET /api/v1/events and a secret added after a record was built', () => {
  let served: InProcessHttp | undefined;
  afterEach(async () => served?.close());

  it('streams the record scrubbed with the secrets of now, and filters it as shown (regression: streamed as built)', async () => {
    served = await serveInProcess({ mcpServers: {}, estate: { enabled: false } });
    const { serving, gateway } = served;
    const all = await events(serving.url);
    const byPattern = await events(serving.url, '?tool=nope-l*');
    const byShown = await events(serving.url, '?tool=nope-?REDACTED?*');

    // Built (scrubbed) before the value was a secret; the secret comes before it is published.
    const record = built('c-later', `nope-${LATER}`);
    gateway.scrubber.addSecrets([LATER]);
    gateway.publisher.publish(record);
    // Matched by every stream's filter: once each has it, each has had its chance at the first.
    gateway.publisher.publish(built('c-marker', 'nope-lREDACTEDx'));

    for (const stream of [all, byPattern, byShown]) await expect.poll(stream.text, { timeout: 5_000 }).toContain('c-marker');
    expect(all.text()).toContain('id: c-later');
    expect(all.text()).not.toContain(LATER);
    expect(all.text()).toContain('"name":"nope-[REDACTED]"');
    expect(byPattern.text()).not.toContain('c-later');
    expect(byShown.text()).toContain('id: c-later');
    for (const stream of [all, byPattern, byShown]) stream.close();
  });
});
