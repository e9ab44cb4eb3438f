/**
 * The tool router: every call's invoke goes through `dispatch` (DESIGN.md "The data path").
 * Local tools (the broker's own and user function tools) are looked up first; anything else is
 * an upstream tool in the roster, dispatched to its upstream by table.
 */
import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import type { Dispatcher } from '../broker/invoke.js';
import type { BrokerCall, ToolTarget } from '../broker/types.js';
import { noteProgress } from '../broker/deadline.js';
import { BrokerError } from '../shared/errors.js';
import type { Clock } from '../shared/clock.js';
import type { Registry } from '../upstream/registry.js';
import { toolHash } from '../upstream/roster.js';

/** A tool the broker serves itself. */
export interface LocalTool {
  readonly definition: Tool;
  /** Server key shown in records (`broker`, `estate`, `functions`). */
  readonly server: string;
  run(call: BrokerCall): Promise<CallToolResult>;
}

export class ToolRouter implements Dispatcher {
  private readonly local = new Map<string, LocalTool & { hash: string }>();

  constructor(
    private readonly registry: Registry,
    private readonly clock: Clock,
  ) {}

  /** Adds a local tool; its name wins over an upstream tool of the same name. */
  addLocal(tool: LocalTool): void {
    this.local.set(tool.definition.name, { ...tool, hash: toolHash(tool.definition) });
  }

  /** Every tool advertised: local first, then the roster. */
  list(): Tool[] {
    const out: Tool[] = [];
    for (const t of this.local.values()) out.push(t.definition);
    for (const t of this.registry.roster.tools.values()) if (!this.local.has(t.name)) out.push(t.definition);
    return out;
  }

  /** The target of an advertised name; undefined when no tool by that name was ever known. */
  resolve(name: string): ToolTarget | undefined {
    const local = this.local.get(name);
    if (local) {
      return { name, server: local.server, toolName: name, state: 'active', source: 'local', definition: local.definition, hash: local.hash };
    }
    const found = this.registry.resolveTool(name);
    if (!found) return undefined;
    return {
      name,
      server: found.server,
      toolName: found.toolName,
      state: found.state,
      source: 'upstream',
      definition: found.tool?.definition,
      hash: found.tool?.hash,
    };
  }

  async dispatch(call: BrokerCall): Promise<CallToolResult> {
    const target = call.target;
    if (!target) throw new BrokerError('guard_error', 'dispatch without a resolved target');
    const local = target.source === 'local' ? this.local.get(target.name) : undefined;
    if (local) return local.run(call);
    const upstream = this.registry.upstream(target.server);
    if (!upstream) throw new BrokerError('upstream_unavailable', `no upstream "${target.server}"`);
    const onProgress = call.request.onProgress;
    const end = call.hardDeadline ?? call.deadline ?? this.clock.now() + 60_000;
    const remaining = Math.max(1, end - this.clock.now());
    return upstream.callTool(target.toolName, call.request.args, {
      signal: call.signal,
      timeoutMs: remaining,
      meta: call.request.meta,
      onServerRequest: call.request.onServerRequest,
      onProgress: onProgress
        ? (update) => {
            noteProgress(call);
            onProgress(update);
          }
        : undefined,
    });
  }
}
