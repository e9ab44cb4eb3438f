/**
 * The protocol era of one upstream, remembered across restarts (the store's era verdicts): an
 * upstream is probed once (`server/discover`, then `initialize` on a legacy answer; the SDK
 * client's `versionNegotiation: {mode: 'auto'}`), and later dials hand the verdict to the SDK
 * (`connect(transport, {prior})`) instead of probing again.
 *
 * - A verdict is bound to the upstream's definition ({@link upstreamDefinitionHash}): a changed
 *   command, arguments, environment, URL or headers is a new server, probed afresh.
 * - A legacy verdict is used for `legacyEraMaxAgeMs` after its probe (schema default a day): an
 *   upgraded server still answers `initialize`, so nothing else would ever retire it.
 * - A modern verdict has no age: when it is stale the dial fails (`EraNegotiationFailed`, or the
 *   first listing is refused) and the connection probes again (connection.ts).
 * - An SSE upstream is legacy by its transport and never probed.
 */
import { createHash } from 'node:crypto';
import type { DiscoverResult, PriorDiscovery } from '@modelcontextprotocol/client';
import type { HttpServerConfig, SseServerConfig, StdioServerConfig } from '../config/schema.js';
import type { Clock } from '../shared/clock.js';
import { messageOf } from '../shared/errors.js';
import type { Logger } from '../shared/logger.js';
import type { EraVerdict, Store } from '../store/index.js';
import { stableJson } from './roster.js';

export type ProtocolEraName = 'modern' | 'legacy';

/** The part of the store era verdicts use. */
export type EraVerdictStore = Pick<Store, 'getEraVerdict' | 'setEraVerdict' | 'forgetEraVerdict'>;

export interface EraMemoryOptions {
  /** The server key. */
  name: string;
  config: StdioServerConfig | HttpServerConfig | SseServerConfig;
  /** Where verdicts are kept; absent: none is remembered (every dial probes). */
  store?: EraVerdictStore;
  clock: Clock;
  logger: Logger;
  /** `broker.legacyEraMaxAgeMs`, in ms. */
  legacyMaxAgeMs: number;
}

/**
 * sha256 (hex) over the fields of an upstream's config that decide which server answers: kind,
 * command, arguments, environment, working directory for stdio; kind, URL and headers for HTTP
 * and SSE. Other settings (prefix, timeouts, tool overrides) leave it unchanged.
 */
export function upstreamDefinitionHash(config: StdioServerConfig | HttpServerConfig | SseServerConfig): string {
  const defining =
    'command' in config
      ? { kind: 'stdio', command: config.command, args: config.args, env: config.env, cwd: config.cwd ?? null, inheritEnv: config.inheritEnv }
      : { kind: config.type === 'sse' ? 'sse' : (config.type ?? 'url'), url: config.url, headers: config.headers };
  return createHash('sha256').update(stableJson(defining)).digest('hex');
}

/** One upstream's era verdict: what to hand the SDK at the next dial, and what to remember after it. */
export class EraMemory {
  readonly definitionHash: string;

  constructor(private readonly options: EraMemoryOptions) {
    this.definitionHash = upstreamDefinitionHash(options.config);
  }

  /** Whether the upstream is probed at all: SSE is legacy by its transport; `era: "legacy"` pins it so. */
  get negotiates(): boolean {
    const config = this.options.config;
    if ('era' in config && config.era === 'legacy') return false;
    return 'command' in config || config.type !== 'sse';
  }

  /**
   * The verdict to connect with: the stored one when it was found for this definition and (for
   * legacy) is younger than `legacyMaxAgeMs`; undefined (probe) otherwise, or when the store
   * cannot be read (logged at warn).
   */
  async prior(): Promise<PriorDiscovery | undefined> {
    if (!this.negotiates) return { kind: 'legacy' };
    const store = this.options.store;
    if (!store) return undefined;
    let verdict: EraVerdict | undefined;
    try {
      verdict = await store.getEraVerdict(this.options.name);
    } catch (err) {
      this.options.logger.warn({ err: messageOf(err) }, 'era verdict could not be read; probing');
      return undefined;
    }
    if (!verdict || verdict.definitionHash !== this.definitionHash) return undefined;
    if (verdict.era === 'modern') return verdict.discover ? { kind: 'modern', discover: verdict.discover as DiscoverResult } : undefined;
    const age = this.options.clock.now() - Date.parse(verdict.at);
    return age >= 0 && age < this.options.legacyMaxAgeMs ? { kind: 'legacy' } : undefined;
  }

  /**
   * Stores what a probe found: `discover` (the upstream's `server/discover` result) for a modern
   * upstream, undefined for a legacy one. A store failure is logged, never thrown: the upstream
   * is connected either way and is probed again next time.
   */
  async remember(discover: DiscoverResult | undefined): Promise<void> {
    const store = this.options.store;
    if (!store || !this.negotiates) return;
    const verdict: EraVerdict = {
      upstream: this.options.name,
      definitionHash: this.definitionHash,
      era: discover ? 'modern' : 'legacy',
      ...(discover ? { discover: discover as object } : {}),
      at: new Date(this.options.clock.now()).toISOString(),
    };
    try {
      await store.setEraVerdict(verdict);
    } catch (err) {
      this.options.logger.warn({ err: messageOf(err) }, 'era verdict could not be stored');
    }
  }
}
