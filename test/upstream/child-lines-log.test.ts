/**
 * A stdio child's stray stdout line (not JSON) and its stderr lines are scrubbed whole before
 * anything cuts them: the log line (LOGGED_LINE_CHARS), and the stderr tail and error line kept
 * for the upstream's status. Cut first, a secret running across the cut left part of it, which
 * the logger's and the status's own scrub no longer recognised.
 */
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { waitFor } from '../e2e/helpers.js';
import { createLogger } from '../../src/shared/logger.js';
import { Scrubber } from '../../src/shared/scrub.js';
import { ChildProcessTransport, LOGGED_LINE_CHARS } from '../../src/upstream/child-transport.js';
import { shownStderrLine, STDERR_LINE_KEPT_CHARS, STDERR_LINE_MAX_CHARS } from '../../src/upstream/stderr-line.js';

const SECRET = 'child-line-secret-7f3a9c2e11d4b8';

function capture(): { stream: Writable; text: () => string } {
  let text = '';
  const stream = new Writable({
    write(chunk, _enc, done) {
      text += String(chunk);
      done();
    },
  });
  return { stream, text: () => text };
}

describe('a child line across the log cut', () => {
  it('stdout noise and stderr: the secret at the cut is scrubbed, no prefix of it is logged', async () => {
    const scrubber = new Scrubber([SECRET]);
    const log = capture();
    const logger = createLogger({ level: 'debug', scrubber, stream: log.stream });
    // The secret starts 10 characters before the cut.
    const line = 'x'.repeat(LOGGED_LINE_CHARS - 10) + SECRET + ' tail';
    const script = `process.stdout.write(${JSON.stringify(line)} + "\\n"); process.stderr.write(${JSON.stringify(line)} + "\\n"); setTimeout(() => {}, 50);`;
    const transport = new ChildProcessTransport({ command: process.execPath, args: ['-e', script], env: {}, logger, scrub: (t) => scrubber.text(t) });
    const closed = new Promise<void>((resolve) => (transport.onclose = resolve));
    await transport.start();
    await closed;
    const out = log.text();
    expect(out).toContain('upstream wrote a non-JSON line to stdout');
    expect(out).toContain('upstream stderr');
    expect(out).toContain('[REDACTED]');
    expect(out).not.toContain(SECRET.slice(0, 6));
  });

  it("the stderr tail kept for the status starts inside no secret: a crash line whose secret crosses the tail's start", async () => {
    const scrubber = new Scrubber([SECRET]);
    // 2048 characters are kept from the end: the secret's last 15 characters fall inside them.
    const line = 'y'.repeat(100) + SECRET + 'z'.repeat(2048 - 15 - 1);
    const script = `process.stderr.write(${JSON.stringify(`Error: ${line}`)} + "\\n"); process.exitCode = 1;`;
    const transport = new ChildProcessTransport({ command: process.execPath, args: ['-e', script], env: {}, logger: createLogger({ level: 'silent' }), scrub: (t) => scrubber.text(t) });
    const closed = new Promise<void>((resolve) => (transport.onclose = resolve));
    await transport.start();
    await closed;
    expect(transport.stderr.length).toBeGreaterThan(1000);
    expect(transport.stderr).not.toContain(SECRET.slice(-6));
    expect(transport.stderrLine).toContain('[REDACTED]');
    expect(transport.stderrLine).not.toContain(SECRET.slice(-6));
  });

  it('a secret learned after the error line was kept (a reload): no start of one that crosses the kept line\'s cut is shown, however much the scrub shrinks what comes before', async () => {
    const scrubber = new Scrubber();
    const late = 'late-secret-' + 'k'.repeat(188);
    // Ten copies, then one that crosses the cut at STDERR_LINE_KEPT_CHARS 20 characters in: once
    // the ten are redacted, those 20 characters would stand within the first STDERR_LINE_MAX_CHARS.
    const head = `Error: ${`${late} `.repeat(10)}`;
    const line = head + 'x'.repeat(STDERR_LINE_KEPT_CHARS - head.length - 20) + late + ' tail';
    const script = `process.stderr.write(${JSON.stringify(line)} + "\\n"); process.exitCode = 1;`;
    const transport = new ChildProcessTransport({ command: process.execPath, args: ['-e', script], env: {}, logger: createLogger({ level: 'silent' }), scrub: (t) => scrubber.text(t) });
    const closed = new Promise<void>((resolve) => (transport.onclose = resolve));
    await transport.start();
    await closed;
    scrubber.addSecrets([late]);
    const shown = shownStderrLine(transport.stderrLine!, (t) => scrubber.text(t));
    expect(shown.length).toBeLessThanOrEqual(STDERR_LINE_MAX_CHARS);
    expect(shown).not.toContain(late.slice(0, 12));
    expect(shown).toMatch(/^Error: \[REDACTED\] /);
  });

  it("a stderr line still unended when its start is dropped (over 8 KiB): the end of a secret the drop ran through is not kept", async () => {
    const scrubber = new Scrubber([SECRET]);
    const log = capture();
    const logger = createLogger({ level: 'debug', scrubber, stream: log.stream });
    // The unended line keeps its last 8,192 characters: they begin 15 characters before the secret's end.
    const unended = 'Error: ' + 'p'.repeat(3000) + SECRET + 'q'.repeat(8192 - 15);
    // The line is ended (and the child exits) only once the broker has read its start: when it is told to on stdin.
    const script = `process.stderr.write(${JSON.stringify(unended)}); process.stdin.once('data', () => { process.stderr.write(' end\\n'); process.exit(1); });`;
    const transport = new ChildProcessTransport({ command: process.execPath, args: ['-e', script], env: {}, logger, scrub: (t) => scrubber.text(t) });
    const closed = new Promise<void>((resolve) => (transport.onclose = resolve));
    await transport.start();
    await waitFor(() => transport.stderr.length > 0, 'the unended line read');
    expect(transport.stderr).not.toContain(SECRET.slice(-6));
    await transport.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    await closed;
    expect(transport.stderr).toContain(' end');
    expect(transport.stderr).not.toContain(SECRET.slice(-6));
    expect(transport.stderrLine).not.toContain(SECRET.slice(-6));
    expect(log.text()).toContain('upstream stderr');
    expect(log.text()).not.toContain(SECRET.slice(-6));
  });
});
