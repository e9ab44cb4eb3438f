/**
 * Pretty logs (stderr a terminal, or `MCP_BROKER_LOG_FORMAT=pretty`) go to a person's terminal,
 * and their fields carry an upstream's or a caller's text: a stray line an upstream wrote to
 * stdout, its error, a refused path. pino-pretty writes each field as JSON, which escapes C0
 * controls only: a C1 CSI, a right-to-left override, a zero-width space or a line separator
 * reached the terminal raw. Now every string of a log line is escaped with `printable` before it
 * is formatted. Through the real CLI over stdio, with test/fixtures/noisy.mjs writing the line.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, nodeServer, startBroker, waitFor, type StartedBroker } from './helpers.js';

/** Any character `printable` escapes but the newline ending each line. */
const UNPRINTABLE = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff]/;
const STRAY = 'upstream wrote a non-JSON line to stdout; skipped';

describe('pretty logs show no control or invisible characters an upstream chose', () => {
  let broker: StartedBroker;

  beforeAll(async () => {
    broker = await startBroker({ servers: { noisy: nodeServer(fixture('noisy.mjs')) }, env: { MCP_BROKER_LOG_FORMAT: 'pretty' } });
  });
  afterAll(async () => broker?.close());

  it('a stray stdout line with C1 controls, bidi and invisible characters is logged with each shown as an escape (regression: written raw)', async () => {
    // OSC 52 (a clipboard write), C1 CSI and NEL, a right-to-left override, a zero-width space, a line separator.
    const line = 'hi\u001b]52;c;cHduZWQ=\u0007 \u009b2J\u0085 \u202eevil \u200bx\u2028y';
    await broker.client.callTool({ name: 'noisy__say', arguments: { line } });
    await waitFor(() => broker.stderr().split('\n').filter((l) => l.includes(STRAY)).length >= 2, 'the stray line logged');
    const stderr = broker.stderr();
    expect(stderr).not.toMatch(UNPRINTABLE);
    expect(stderr).toContain('"hi\\x1b]52;c;cHduZWQ=\\x07 \\x9b2J\\x85 \\u202eevil \\u200bx\\u2028y"');
  });
});
