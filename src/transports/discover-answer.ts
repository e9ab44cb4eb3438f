/**
 * A modern instance's `server/discover` answer: `supportedVersions` (era.ts
 * {@link MODERN_REVISIONS}, what the SDK's entries list), the instance's capabilities with the
 * upstreams' `extensions` and the broker's tasks extension, and the `instructions` its principal
 * may read (`Gateway.surface`: those of the upstreams it sees something of).
 *
 * A stdio connection keeps one instance while it lasts, so the surface is judged again whenever
 * what it was judged on is replaced (`Gateway.surfaceBasis`: a config reload replaces the policy
 * and rebuilds the roster; an upstream ready, gone or listing anew rebuilds the roster): an
 * upstream the policy now hides from the principal says nothing to it in the next answer, and one
 * added or allowed since does. While neither changes the surface is kept, not judged again: the
 * opening `server/discover` is on the start path. Over HTTP each request has an instance of its
 * own, so each is judged as the request arrives.
 */
import type { Server, ServerCapabilities } from '@modelcontextprotocol/server';
import type { Gateway } from '../gateway.js';
import { sameSurfaceBasis, type ServedSurface, type SurfaceBasis } from '../upstream/surface.js';
import { MODERN_REVISIONS } from './era.js';
import { TASKS_EXTENSION } from './modern-tasks.js';

/** The `extensions` the broker declares with `surface`: the upstreams' and its own tasks extension. */
export function declaredExtensions(surface: ServedSurface): NonNullable<ServerCapabilities['extensions']> {
  return { ...surface.extensions, ...TASKS_EXTENSION };
}

/** One modern instance's `server/discover` answer, judged again when its basis is replaced (see the file's comment). */
export class DiscoverAnswer {
  private basis: SurfaceBasis;
  private served: ServedSurface;

  /** Judges the surface for `principal` now (what the instance is constructed with: {@link surface}). */
  constructor(
    private readonly gateway: Pick<Gateway, 'surface' | 'surfaceBasis'>,
    private readonly principal: string,
  ) {
    this.basis = gateway.surfaceBasis();
    this.served = gateway.surface(principal);
  }

  /** The surface as it holds now: the one kept while its basis is the gateway's, else judged again. */
  surface(): ServedSurface {
    const now = this.gateway.surfaceBasis();
    if (!sameSurfaceBasis(this.basis, now)) {
      this.basis = now;
      this.served = this.gateway.surface(this.principal);
    }
    return this.served;
  }

  /**
   * Answers the `server/discover` of `server` from {@link surface} from now on, its other
   * capabilities as the instance declares them. Called once the serving entry has connected the
   * instance: the entry installs the SDK's handler (built on what the instance was constructed
   * with) before it connects, and this one replaces it.
   */
  install(server: Server): void {
    server.setRequestHandler('server/discover', () => {
      const surface = this.surface();
      return {
        supportedVersions: [...MODERN_REVISIONS],
        capabilities: { ...server.getCapabilities(), extensions: declaredExtensions(surface) },
        ...(surface.instructions !== undefined && { instructions: surface.instructions }),
      };
    });
  }
}
