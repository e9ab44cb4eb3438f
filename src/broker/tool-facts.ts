/**
 * Per-tool facts the call path and `tools/list` read from the config: a tool's per-tool settings
 * (`mcpServers.<key>.tools`: own names, advertised names, globs), its deadline, whether its
 * verdict is read from its JSON text, and whether it counts as read-only. Reads the config it is
 * given on each lookup, so a reload that replaces `mcpServers` in place is seen once
 * {@link ToolFacts.forget} drops the compiled tables.
 */
import type { Config } from '../config/schema.js';
import { serverKind } from '../config/schema.js';
import { ToolSettingsTable, type ToolSettings } from '../upstream/tool-settings.js';
import type { CompiledPolicy } from './policy.js';
import type { ToolTarget } from './types.js';

export class ToolFacts {
  /** Compiled per-tool settings of each MCP server. */
  private readonly tables = new Map<string, ToolSettingsTable>();

  constructor(
    private readonly config: Pick<Config, 'mcpServers' | 'broker'>,
    private readonly policy: Pick<CompiledPolicy, 'listedReadOnly'>,
  ) {}

  /** Drops the compiled tables (a reload replaced `mcpServers`). */
  forget(): void {
    this.tables.clear();
  }

  /** The per-tool settings table of MCP server `server`; undefined for REST servers (their `tools` define the tools) and unknown ones. */
  settings(server: string): ToolSettingsTable | undefined {
    let table = this.tables.get(server);
    if (!table) {
      const config = this.config.mcpServers[server];
      if (!config || serverKind(config) === 'rest' || !('tools' in config)) return undefined;
      this.tables.set(server, (table = new ToolSettingsTable(config.tools as Record<string, ToolSettings>)));
    }
    return table;
  }

  /** Deadline of a call to `target`, in ms: per tool, else per server, else `broker.timeoutMs`. */
  timeoutFor(target: ToolTarget | undefined): number {
    const server = target ? this.config.mcpServers[target.server] : undefined;
    if (!target || !server) return this.config.broker.timeoutMs;
    const table = this.settings(target.server);
    const perTool = table
      ? table.for(target.toolName, target.name).timeoutMs
      : 'tools' in server
        ? (server.tools as Record<string, { timeoutMs?: number }>)[target.toolName]?.timeoutMs
        : undefined;
    return perTool ?? server.timeoutMs ?? this.config.broker.timeoutMs;
  }

  /** Whether `target`'s verdict is read from its JSON text too: the per-tool `verdictFromText`, else the server's (default false). */
  verdictFromText(target: ToolTarget | undefined): boolean {
    const server = target ? this.config.mcpServers[target.server] : undefined;
    if (!server || !('verdictFromText' in server)) return false;
    const perTool = this.settings(target!.server)?.for(target!.toolName, target!.name).verdictFromText;
    return perTool ?? server.verdictFromText;
  }

  /**
   * Whether a tool counts as read-only (retry, `read-only` mode): a per-tool `readOnly` wins;
   * else listed in `policy.readOnly` (globs over advertised names) or `annotations.readOnlyHint: true`.
   */
  isReadOnly(target: ToolTarget): boolean {
    const server = this.config.mcpServers[target.server];
    const table = server ? this.settings(target.server) : undefined;
    const override = table
      ? table.for(target.toolName, target.name).readOnly
      : server && 'tools' in server
        ? (server.tools as Record<string, { readOnly?: boolean }>)[target.toolName]?.readOnly
        : undefined;
    if (override !== undefined) return override;
    if (this.policy.listedReadOnly(target.name)) return true;
    return target.definition?.annotations?.readOnlyHint === true;
  }
}
