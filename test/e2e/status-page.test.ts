/**
 * The status page (issue 20), driven in headless Chromium (Debian's `chromium`, through
 * playwright-core; one browser for the file) against the real CLI over HTTP. Upstreams: the
 * bundled servers.json's (server-everything, server-filesystem, server-memory), echo,
 * crashy (its `crash` exits the child: upstream_error, and with `threshold: 1` an open breaker)
 * and one that throws at start. The page must list the upstreams with the failing one's error
 * line, the roster with policy and pin state, show a call made over MCP as it happens, show the
 * open breaker, let an operator approve a call parked in the approval inbox, and show a user
 * only its own calls. It must work under the CSP it is sent with
 * (no violation reported). A screenshot is saved to `test-results/status-page.png`.
 */
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, nodeServer, ROOT } from './helpers.js';
import { connectHttp, http, startHttpBroker, type ConnectedClient, type HttpBroker } from '../transports/harness.js';

/** Debian's package; `.ci/run` installs it when missing. `CHROMIUM_PATH` overrides. */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const OP = 'status-operator-token-0123456789';
const ALICE = 'status-alice-token-0123456789';
const BOB = 'status-bob-token-0123456789';
const UI_TIMEOUT_MS = 15_000;

/** The repo's own servers.json upstreams (server-everything, -filesystem, -memory), run from the repo root. */
function bundledServers(): Record<string, unknown> {
  const bundled = JSON.parse(readFileSync(join(ROOT, 'servers.json'), 'utf8')) as { mcpServers: Record<string, Record<string, unknown>> };
  return Object.fromEntries(Object.entries(bundled.mcpServers).map(([k, v]) => [k, { ...v, cwd: ROOT }]));
}

describe('status page in Chromium', () => {
  let broker: HttpBroker;
  let browser: Browser;
  let alice: ConnectedClient;
  let bob: ConnectedClient;
  const violations: string[] = [];

  async function open(token: string | undefined): Promise<Page> {
    const context = await browser.newContext();
    const page = await context.newPage();
    page.on('console', (m) => {
      if (/Content.Security.Policy|Refused to/i.test(m.text())) violations.push(m.text());
    });
    page.on('pageerror', (e) => violations.push(`page error: ${e.message}`));
    await page.goto(`${broker.url}/${token ? `#token=${token}` : ''}`);
    return page;
  }

  beforeAll(async () => {
    broker = await startHttpBroker({
      servers: {
        ...bundledServers(),
        echo: nodeServer(fixture('echo.mjs')),
        crashy: nodeServer(fixture('crashy.mjs')),
        broken: nodeServer(fixture('throws-at-start.mjs')),
      },
      extra: {
        principals: { op: { token: OP, role: 'operator' }, alice: { token: ALICE }, bob: { token: BOB } },
        broker: { breaker: { threshold: 1, openMs: 600_000 }, restart: { initialDelayMs: 10, maxDelayMs: 50 } },
        policy: { default: 'allow', askMode: 'park', rules: [{ tools: ['echo__slow'], action: 'deny' }, { tools: ['crashy__hello'], action: 'ask' }] },
      },
    });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    alice = await connectHttp(broker.url, 'streamable', { token: ALICE });
    bob = await connectHttp(broker.url, 'streamable', { token: BOB });
  });
  afterAll(async () => {
    await alice?.close();
    await bob?.close();
    await browser?.close();
    await broker?.close();
  });

  it('sends a strict CSP, and serves the data only behind the bearer auth', async () => {
    const page = await http(`${broker.url}/`);
    expect(page.status).toBe(200);
    const csp = page.headers.get('content-security-policy')!;
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    expect(page.text).not.toContain('echo__echo'); // the shell holds no data
    expect((await http(`${broker.url}/api/v1/status`)).status).toBe(401);
    const status = await http(`${broker.url}/api/v1/status`, { headers: { authorization: `Bearer ${ALICE}` } });
    expect(status.status).toBe(200);
    // Both eras served: the modern revision first, then the initialize ones.
    expect((status.body as { protocolVersions: string[] }).protocolVersions.slice(0, 2)).toEqual(['2026-07-28', '2025-11-25']);
  });

  it('asks for a token when none is given', async () => {
    const page = await open(undefined);
    await page.locator('#login').waitFor({ state: 'visible', timeout: UI_TIMEOUT_MS });
    expect(await page.locator('#upstreams tbody tr').count()).toBe(0);
    await page.fill('#token', OP);
    await page.click('#login button');
    await page.locator('#upstreams tr[data-name="echo"]').waitFor({ timeout: UI_TIMEOUT_MS });
    await page.context().close();
  });

  it('shows an operator the upstreams, roster, a live call, a failing upstream and an open breaker', async () => {
    const page = await open(OP);
    await page.locator('#upstreams tr[data-name="echo"][data-state="ready"]').waitFor({ timeout: UI_TIMEOUT_MS });
    for (const name of ['everything', 'fs', 'memory', 'echo']) await page.locator(`#upstreams tr[data-name="${name}"][data-state="ready"]`).waitFor({ timeout: UI_TIMEOUT_MS });
    for (const name of ['crashy', 'broken']) expect(await page.locator(`#upstreams tr[data-name="${name}"]`).count()).toBe(1);
    for (const name of ['everything__echo', 'fs__read_text_file', 'memory__read_graph']) expect(await page.locator(`#tools tr[data-name="${name}"]`).count()).toBe(1);
    await expect.poll(() => page.locator('#upstreams tr[data-name="broken"] td.error').textContent(), { timeout: UI_TIMEOUT_MS }).toContain('fixture failed at start');
    expect(await page.locator('#tools tr[data-name="echo__echo"]').getAttribute('data-policy')).toBe('allow');
    expect(await page.locator('#tools tr[data-name="echo__slow"]').getAttribute('data-policy')).toBe('deny');
    expect(await page.locator('#tools tr[data-name="echo__echo"]').getAttribute('data-pin')).toBe('pinned');
    expect(await page.locator('#version').textContent()).toMatch(/^\d+\.\d+\.\d+/);
    expect(await page.locator('#eras').textContent()).toContain('2025-11-25');
    expect(await page.locator('#approvals').textContent()).toBe('none');
    expect(await page.locator('#breakers').textContent()).toBe('none');
    await page.locator('#live.on').waitFor({ timeout: UI_TIMEOUT_MS });

    // A call over MCP appears while the page is open.
    const result = await alice.client.callTool({ name: 'echo__echo', arguments: { text: 'seen live' } });
    const callId = (result._meta as Record<string, string>)['mcp-broker/callId'];
    const row = page.locator(`#calls tr[data-call-id="${callId}"]`);
    await row.waitFor({ timeout: UI_TIMEOUT_MS });
    expect(await row.getAttribute('data-outcome')).toBe('ok');
    expect(await row.getAttribute('data-principal')).toBe('alice');

    // A failing upstream call opens the breaker; the page shows it.
    const op = await connectHttp(broker.url, 'streamable', { token: OP });
    try {
      const crash = await op.client.callTool({ name: 'crashy__crash', arguments: {} });
      expect((crash._meta as Record<string, string>)['mcp-broker/outcome']).toBe('upstream_error');
    } finally {
      await op.close();
    }
    await page.locator('#breakers li[data-name="crashy__crash"][data-state="open"]').waitFor({ timeout: UI_TIMEOUT_MS });
    await page.locator('#calls tr[data-name="crashy__crash"][data-outcome="upstream_error"]').waitFor({ timeout: UI_TIMEOUT_MS });
    mkdirSync(join(ROOT, 'test-results'), { recursive: true });
    await page.screenshot({ path: join(ROOT, 'test-results', 'status-page.png'), fullPage: true });
    await page.context().close();
    expect(violations).toEqual([]);
  });

  it('lists a call parked in the approval inbox, and an operator approves it with the page’s button', async () => {
    const page = await open(OP);
    await page.locator('#live.on').waitFor({ timeout: UI_TIMEOUT_MS });
    const waiting = alice.client.callTool({ name: 'crashy__hello', arguments: {} }, { timeout: 60_000 });
    const entry = page.locator('#approvals li[data-tool="crashy__hello"]');
    await entry.waitFor({ timeout: UI_TIMEOUT_MS });
    expect(await entry.textContent()).toContain('for alice');
    await entry.locator('button.approve').click();
    const result = await waiting;
    expect((result._meta as Record<string, string>)['mcp-broker/outcome']).toBe('ok');
    expect(JSON.stringify(result.content)).toContain('hello from');
    await page.locator('#approvals li.none').waitFor({ timeout: UI_TIMEOUT_MS });
    await page.context().close();
    expect(violations).toEqual([]);
  });

  it('shows a user only its own calls, live too', async () => {
    await bob.client.callTool({ name: 'echo__echo', arguments: { text: 'bob before' } });
    const page = await open(ALICE);
    await page.locator('#live.on').waitFor({ timeout: UI_TIMEOUT_MS });
    expect(await page.locator('#viewer').textContent()).toBe('alice (user)');
    await bob.client.callTool({ name: 'echo__echo', arguments: { text: 'bob while alice looks' } });
    const mine = await alice.client.callTool({ name: 'echo__echo', arguments: { text: 'alice after' } });
    const callId = (mine._meta as Record<string, string>)['mcp-broker/callId'];
    await page.locator(`#calls tr[data-call-id="${callId}"]`).waitFor({ timeout: UI_TIMEOUT_MS });
    const principals = await page.locator('#calls tbody tr').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-principal')));
    expect(principals.length).toBeGreaterThanOrEqual(2); // the earlier call and this one
    expect(new Set(principals)).toEqual(new Set(['alice']));
    // A user sees the failing upstream's state, not its error line, and only the tools it may call.
    expect(await page.locator('#upstreams tr[data-name="broken"] td.error').textContent()).toBe('');
    expect(await page.locator('#tools tr[data-name="echo__slow"]').count()).toBe(0);
    await page.context().close();
    expect(violations).toEqual([]);
  });
});
