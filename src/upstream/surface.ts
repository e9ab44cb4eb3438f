/**
 * The upstreams' part of the broker's modern `server/discover` answer, its surface: the
 * capability `extensions` every ready upstream declares (an extension is offered only when each
 * of them can honour it) and their `instructions`, one paragraph per upstream. A principal is
 * given the instructions of the upstreams it sees something of ({@link servedSurface}): an
 * upstream the policy hides from it whole says nothing to it either.
 *
 * A stdio connection's modern instance is built once; its answer is judged again only when what it
 * was judged on ({@link SurfaceBasis}) is replaced (transports/discover-answer.ts). So that its
 * opening `server/discover` need not wait for every upstream's first dial, the surface is
 * remembered in the store under {@link surfaceKey} (the set of upstream definitions it was found
 * for) when a first dial leaves every enabled MCP upstream ready, and a later start with the same
 * definitions answers with the remembered one at once. A negotiating SDK client starts a stdio
 * server twice (a disposable probe process for `server/discover`, then the real one), so without
 * it each connection pays two whole upstream boots. A changed definition is a new key, found
 * afresh; an upstream that changed what it declares under the same definition is seen from the
 * next start on.
 */
import { createHash } from 'node:crypto';
import type { ServerCapabilities } from '@modelcontextprotocol/server';
import type { PolicyConfig, ServerConfig } from '../config/schema.js';
import { upstreamDefinitionHash } from './era-memory.js';
import type { Roster } from './roster.js';
import type { Upstream } from './types.js';

/** One upstream's `instructions`, as it gave them at initialize (scrubbed). */
export interface UpstreamInstructions {
  readonly server: string;
  readonly text: string;
}

/** What the upstreams add to a modern `server/discover` answer; both fields absent when they add nothing. */
export interface UpstreamSurface {
  /** Extension ids (with the first upstream's settings) that every ready upstream declares. */
  readonly extensions?: ServerCapabilities['extensions'];
  /** Each ready upstream's instructions, in config order; absent when none gave any. */
  readonly instructions?: readonly UpstreamInstructions[];
}

/** The surface as one principal is served it: the instructions it may read, as one text. */
export interface ServedSurface {
  readonly extensions?: ServerCapabilities['extensions'];
  /** `<server>: <text>` of each upstream `sees` names, separated by a blank line; absent: none. */
  readonly instructions?: string;
}

/** The surface of the upstreams that are ready now (rest upstreams have none). */
export function liveSurface(upstreams: readonly Upstream[]): UpstreamSurface {
  const ready = upstreams.filter((u) => u.status.state === 'ready' && u.kind !== 'rest');
  let extensions: NonNullable<ServerCapabilities['extensions']> | undefined;
  for (const u of ready) {
    const own = u.capabilities?.extensions ?? {};
    extensions = extensions === undefined ? { ...own } : Object.fromEntries(Object.entries(extensions).filter(([key]) => key in own));
  }
  const instructions = ready.filter((u) => u.instructions).map((u) => ({ server: u.name, text: u.instructions! }));
  return {
    ...(extensions && Object.keys(extensions).length > 0 && { extensions }),
    ...(instructions.length > 0 && { instructions }),
  };
}

/**
 * What a served surface was judged on (`Gateway.surfaceBasis`): the roster, the policy, and
 * whether the upstreams' first dial had settled (before it, a remembered surface may answer). A
 * config reload replaces the policy and rebuilds the roster; an upstream ready, gone or listing
 * anew rebuilds the roster.
 */
export interface SurfaceBasis {
  readonly roster: Roster;
  readonly policy: PolicyConfig;
  readonly settled: boolean;
}

/** Whether a surface judged on `was` still holds on `now`: the same roster and policy objects, settled alike. */
export function sameSurfaceBasis(was: SurfaceBasis, now: SurfaceBasis): boolean {
  return was.roster === now.roster && was.policy === now.policy && was.settled === now.settled;
}

/** `surface` as served to a principal that sees what `sees` says of each upstream (by name). */
export function servedSurface(surface: UpstreamSurface, sees: (server: string) => boolean): ServedSurface {
  const shown = (surface.instructions ?? []).filter((i) => sees(i.server)).map((i) => `${i.server}: ${i.text}`);
  return {
    ...(surface.extensions && { extensions: surface.extensions }),
    ...(shown.length > 0 && { instructions: shown.join('\n\n') }),
  };
}

/** Whether a stored surface has this module's shape (one stored by an older broker kept its instructions as one text). */
export function isUpstreamSurface(value: unknown): value is UpstreamSurface {
  if (value === null || typeof value !== 'object') return false;
  const { instructions } = value as { instructions?: unknown };
  return instructions === undefined || (Array.isArray(instructions) && instructions.every((i) => typeof i?.server === 'string' && typeof i?.text === 'string'));
}

/**
 * sha256 (hex) over the MCP upstreams of `servers`: each one's key, whether it is disabled, and
 * its definition hash (era-memory.ts: what decides which server answers). A surface is
 * remembered and looked up under it.
 */
export function surfaceKey(servers: Readonly<Record<string, ServerConfig>>): string {
  const parts = Object.keys(servers)
    .sort()
    .flatMap((name) => {
      const server = servers[name]!;
      return server.type === 'rest' ? [] : [`${name}\n${server.disabled === true}\n${upstreamDefinitionHash(server)}`];
    });
  return createHash('sha256').update(parts.join('\n\n')).digest('hex');
}
