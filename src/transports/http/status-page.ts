/**
 * The status page of the HTTP face (issue 20; README "Observability"):
 *
 *  - `GET /` → the page: an HTML shell with its script and style at `/status/app.js` and
 *    `/status/app.css` (status-assets.ts; served by us, no build step, nothing from outside),
 *    sent with a strict `Content-Security-Policy` it works under (no inline script or style, no
 *    other origin). The shell and its assets hold no data, so a browser, which cannot send a
 *    bearer token on navigation, may load them without one ({@link mountStatusAssets}, before the
 *    auth guard); everything the page shows comes from the two routes below, behind the same
 *    bearer auth as `/mcp` (the page sends the token given in `#token=…` or typed into it).
 *  - `GET /api/v1/status` → {@link StatusSnapshot}: upstreams and their state with the last
 *    error line, the roster with each tool's policy action and pin state (both the viewer's), open breakers,
 *    the calls parked in the approval inbox (an operator decides them with the page's buttons,
 *    `POST /api/v1/approvals/:id`, tasks-api.ts), recent calls, the version and the protocol
 *    revisions served. An operator (role `operator`, or `local`) sees all; a user
 *    sees the tools it may call, their breakers, upstream states without error lines, and only
 *    its own calls.
 *  - Live calls: the page listens on `GET /api/v1/events` (admin.ts), same visibility rule.
 */
import { MODERN_REVISION } from '../era.js';
import type { Express, Request, Response } from 'express';
import { SUPPORTED_PROTOCOL_VERSIONS } from '@modelcontextprotocol/server';
import { visibleTools } from '../../broker/visible-tools.js';
import type { CallRecord } from '../../broker/types.js';
import type { Gateway } from '../../gateway.js';
import { listParked } from '../../tasks/inbox.js';
import { scrubbedTaskRow } from '../../tasks/scrubbed-row.js';
import { VERSION } from '../../version.js';
import { API_PREFIX } from './admin.js';
import type { Principal } from './auth.js';
import { queryCalls } from './calls-query.js';
import type { HttpContext } from './context.js';
import { principalOf } from './guards.js';
import { STATUS_CSS, STATUS_HTML, STATUS_JS } from './status-assets.js';

/** Calls the snapshot lists, newest last. */
export const STATUS_RECENT_CALLS = 50;

/** The page's policy: only our own script, style and connections; no frames, no forms elsewhere. */
export const STATUS_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

export interface StatusSnapshot {
  version: string;
  /** Protocol revisions served downstream, newest first. */
  protocolVersions: readonly string[];
  viewer: { principal: string; role: 'user' | 'operator' };
  upstreams: { name: string; kind: string; state: string; errorCode?: string; lastError?: { at: string; message: string } }[];
  tools: { name: string; server: string; toolName: string; policy: string; pin: 'pinned' | 'changed' | 'unpinned' | 'local' }[];
  breakers: { name: string; state: string; until?: string }[];
  /** Calls parked in the approval inbox for an operator's decision (`policy.askMode` `park`), newest first; a user's own only. */
  approvals: { id: string; tool: string; principal: string; reason: string | null; createdAt: string }[];
  calls: CallRecord[];
}

/** The shell and its assets: public, data-free; mounted before the auth guard. */
export function mountStatusAssets(app: Express): void {
  app.get('/', (_req, res) => send(res, 'text/html; charset=utf-8', STATUS_HTML));
  app.get('/status/app.js', (_req, res) => send(res, 'text/javascript; charset=utf-8', STATUS_JS));
  app.get('/status/app.css', (_req, res) => send(res, 'text/css; charset=utf-8', STATUS_CSS));
}

/** `GET /api/v1/status` (behind the auth guard). */
export function mountStatusApi(app: Express, ctx: HttpContext): void {
  app.get(`${API_PREFIX}/status`, async (_req: Request, res: Response) => {
    res.setHeader('Cache-Control', 'no-store');
    res.json(await statusSnapshot(ctx.gateway, principalOf(res)));
  });
}

/** What `principal` may see of the broker now. */
export async function statusSnapshot(gateway: Gateway, principal: Principal): Promise<StatusSnapshot> {
  const operator = principal.role === 'operator';
  const listed = gateway.router.list();
  const tools = operator ? listed : visibleTools(listed, principal.name, gateway.toolVisibility);
  const names = new Set(tools.map((t) => t.name));
  const rows: StatusSnapshot['tools'] = [];
  for (const tool of tools) {
    const target = gateway.router.resolve(tool.name);
    if (!target) continue;
    const policy = gateway.policy.action(tool.name, principal.name, target.policyDefault).action;
    let pin: StatusSnapshot['tools'][number]['pin'] = 'local';
    if (target.source === 'upstream') {
      // The viewer's pin (its own when `approve --principal` re-pinned the tool for it, else everyone's), as the policy column is the viewer's.
      const pinned = await gateway.store.getPin(tool.name, principal.name).catch(() => undefined);
      pin = !pinned ? 'unpinned' : pinned.hash === target.hash ? 'pinned' : 'changed';
    }
    rows.push({ name: tool.name, server: target.server, toolName: target.toolName, policy: target.requireApproval ? 'ask' : policy, pin });
  }
  const upstreams = gateway.registry.upstreams.map((u) => {
    const row: StatusSnapshot['upstreams'][number] = { name: u.name, kind: u.kind, state: u.status.state };
    const last = gateway.lastErrors.get(u.name);
    if (operator) {
      if (u.status.errorCode) row.errorCode = u.status.errorCode;
      // Scrubbed again as shown: a reload may have added a secret since the line was kept. The
      // line was cut (a stderr line at 300 characters) before that secret was known: the start
      // of one that ran across the cut is dropped too (Scrubber.cutText).
      if (last) row.lastError = { at: new Date(last.at).toISOString(), message: gateway.scrubber.cutText(last.message) };
    }
    return row;
  });
  const breakers = gateway.breakers
    .notClosed()
    .filter((b) => operator || names.has(b.name))
    .map((b) => (b.until !== undefined ? { name: b.name, state: b.state, until: new Date(b.until).toISOString() } : { name: b.name, state: b.state }));
  const { path, maxFiles } = gateway.config.broker.records;
  const calls = await queryCalls(path, maxFiles, { outcomes: [], limit: STATUS_RECENT_CALLS, principal: operator ? undefined : principal.name }, gateway.scrubber).catch(() => []);
  // A user's own, filtered in the store before the page's limit: filtered after it, the newest
  // page of other principals' parked calls hid every one of the user's.
  const parked = await listParked(gateway.store, gateway.clock.now(), operator ? {} : { principal: principal.name }).catch(() => ({ items: [] }));
  const approvals = parked.items
    .filter((r) => operator || r.principal === principal.name)
    // Matched as stored, shown scrubbed again: stored when the call parked, maybe before a reload added a secret.
    .map((stored) => scrubbedTaskRow(gateway.scrubber, stored))
    .map((r) => ({ id: r.id, tool: r.name, principal: r.principal, reason: r.reason, createdAt: r.createdAt }));
  return {
    version: VERSION,
    // The modern revision first (served per request), then the `initialize` ones.
    protocolVersions: [MODERN_REVISION, ...SUPPORTED_PROTOCOL_VERSIONS.filter((v) => v !== MODERN_REVISION)],
    viewer: { principal: principal.name, role: principal.role },
    upstreams,
    tools: rows,
    breakers,
    approvals,
    calls,
  };
}

function send(res: Response, contentType: string, body: string): void {
  res.setHeader('Content-Type', contentType);
  res.setHeader('Content-Security-Policy', STATUS_CSP);
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('Referrer-Policy', 'no-referrer');
  res.setHeader('Cache-Control', 'no-cache');
  res.send(body);
}
