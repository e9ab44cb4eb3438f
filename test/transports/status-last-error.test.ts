/**
 * The status page's last error line of an upstream (`GET /api/v1/status`, issue 20) is scrubbed
 * like every other path to a client: an upstream that dies printing its injected secret to stderr
 * shows the line with the secret redacted; so does one whose line holds a value that a config
 * reload made a secret after the line was kept. A real gateway serving HTTP in this process.
 */
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { ManualClock } from '../../src/shared/clock.js';
import { serveInProcess, type InProcessHttp } from './in-process.js';
import { LAST_ERROR_MAX_CHARS } from '../../src/gateway.js';
import { fileURLToPath } from 'node:url';

const fixture = (name: string) => fileURLToPath(new URL(`../fixtures/${name}`, import.meta.url));

const SECRET = `dying-${randomBytes(8).toString('hex')}`;

describe('status page: last error line', () => {
  let served: InProcessHttp | undefined;
  afterEach(async () => served?.close());

  it("an upstream that fails printing its secret shows the line with the secret redacted, scrubbed before it is cut (regression: the line was shown as the upstream wrote it, cut first)", async () => {
    // The secret runs across the 300th character of the line, where a shown line is cut.
    const dying = "console.error('cannot start with key ' + 'x'.repeat(260) + ' ' + process.env.API_TOKEN); process.exit(3)";
    served = await serveInProcess(
      {
        mcpServers: { dying: { command: process.execPath, args: ['-e', dying], env: { API_TOKEN: '${env:DYING_TOKEN}' } } },
        estate: { enabled: false },
      },
      { env: { DYING_TOKEN: SECRET } },
    );
    const { serving } = served;
    const status = async () => (await (await fetch(`${serving.url}/api/v1/status`)).json()) as { upstreams: Array<{ name: string; lastError?: { message: string } }> };
    const row = await vi.waitFor(
      async () => {
        const found = (await status()).upstreams.find((u) => u.name === 'dying');
        expect(found?.lastError?.message).toContain('cannot start with key');
        return found!;
      },
      { timeout: 20_000, interval: 100 },
    );
    expect(row.lastError!.message).not.toContain(SECRET.slice(0, 8));
    expect(row.lastError!.message).toContain('[REDACTED]');
  });

  it('a value a reload makes a secret is redacted in a last error kept before the reload (regression: shown until the upstream failed again)', async () => {
    const later = `later-${randomBytes(8).toString('hex')}`;
    // Not a secret yet: an argument, printed as the upstream dies.
    const dying = { command: process.execPath, args: ['-e', "console.error('cannot start with value ' + process.argv[1]); process.exit(3)", later] };
    const raw = { mcpServers: { dying }, estate: { enabled: false } };
    // A manual clock: the upstream's restart never comes, so its last error is the one kept before the reload.
    served = await serveInProcess(raw, { clock: new ManualClock() });
    const { serving, gateway } = served;
    const lastError = async () => {
      const body = (await (await fetch(`${serving.url}/api/v1/status`)).json()) as { upstreams: Array<{ name: string; lastError?: { message: string } }> };
      return body.upstreams.find((u) => u.name === 'dying')?.lastError?.message;
    };
    // Served once every first dial settled: the dying one's failure is kept.
    expect(await lastError()).toContain(`cannot start with value ${later}`);

    // The reload adds a server whose env holds the value as a secret; "dying" is unchanged, not dialled again.
    const holder = { command: process.execPath, args: ['-e', ''], disabled: true, env: { API_TOKEN: '${env:LATER_TOKEN}' } };
    const diff = await gateway.reload(parseConfig({ ...raw, mcpServers: { dying, holder } }, { baseDir: served.dir, env: { LATER_TOKEN: later } }));
    expect(diff).toMatchObject({ added: ['holder'], changed: [] });

    const shown = await lastError();
    expect(shown).toContain('cannot start with value [REDACTED]');
    expect(shown).not.toContain(later);
  });

  it('a value a reload makes a secret, running across the cut of a last error kept before the reload, shows none of its start (regression: its first 14 characters were shown)', async () => {
    const later = `later-${randomBytes(8).toString('hex')}`;
    // The stderr line is shown cut at 300 characters; the value starts 14 characters before the cut.
    const dying = { command: process.execPath, args: ['-e', "console.error('cannot start with value ' + 'x'.repeat(260) + ' ' + process.argv[1]); process.exit(3)", later] };
    const raw = { mcpServers: { dying }, estate: { enabled: false } };
    served = await serveInProcess(raw, { clock: new ManualClock() });
    const { serving, gateway } = served;
    const lastError = async () => {
      const body = (await (await fetch(`${serving.url}/api/v1/status`)).json()) as { upstreams: Array<{ name: string; lastError?: { message: string } }> };
      return body.upstreams.find((u) => u.name === 'dying')?.lastError?.message;
    };
    // Not a secret yet: its start stands before the cut, as kept.
    expect(await lastError()).toMatch(new RegExp(`x ${later.slice(0, 14)}…$`));

    const holder = { command: process.execPath, args: ['-e', ''], disabled: true, env: { API_TOKEN: '${env:LATER_TOKEN}' } };
    await gateway.reload(parseConfig({ ...raw, mcpServers: { dying, holder } }, { baseDir: served.dir, env: { LATER_TOKEN: later } }));

    const shown = await lastError();
    expect(shown).not.toContain(later.slice(0, 6));
    expect(shown).toMatch(/cannot start with value x{260} …$/);
  });

  it('an upstream whose listing failed with a 1.2 MB error is shown at most LAST_ERROR_MAX_CHARS of it, no start of a later secret either (regression: kept whole, and every GET of the page ran cutText over it, 0.3 s a megabyte on the event loop)', async () => {
    const later = `later-${randomBytes(8).toString('hex')}`;
    const says = { command: process.execPath, args: [fixture('says-why.mjs')], env: { FIXTURE_FAIL: 'list', FIXTURE_TEXT: `ab… ${later} `, FIXTURE_REPEAT: '40000' } };
    const raw = { mcpServers: { says }, estate: { enabled: false } };
    served = await serveInProcess(raw, { clock: new ManualClock() });
    const { serving, gateway } = served;
    const lastError = async () => {
      const body = (await (await fetch(`${serving.url}/api/v1/status`)).json()) as { upstreams: Array<{ name: string; lastError?: { message: string } }> };
      return body.upstreams.find((u) => u.name === 'says')?.lastError?.message;
    };
    const kept = await vi.waitFor(
      async () => {
        const message = await lastError();
        expect(message).toContain('listing failed after connect');
        return message!;
      },
      { timeout: 20_000, interval: 100 },
    );
    expect(kept.length).toBeLessThanOrEqual(LAST_ERROR_MAX_CHARS);
    expect(kept.endsWith('…')).toBe(true);

    const holder = { command: process.execPath, args: ['-e', ''], disabled: true, env: { API_TOKEN: '${env:LATER_TOKEN}' } };
    await gateway.reload(parseConfig({ ...raw, mcpServers: { says, holder } }, { baseDir: served.dir, env: { LATER_TOKEN: later } }));
    const shown = (await lastError())!;
    expect(shown.length).toBeLessThanOrEqual(LAST_ERROR_MAX_CHARS);
    expect(shown).not.toContain(later.slice(0, 6));
  });
});
