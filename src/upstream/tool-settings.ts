/**
 * Per-tool settings of one server (`mcpServers.<key>.tools`; issue 18 §4). A key is the
 * upstream's own tool name, the advertised name (`fs__write_file`), or a glob (picomatch) over
 * either. Every matching entry applies, later ones winning field by field: globs in config order,
 * then the advertised name, then the upstream's own name (the most specific last).
 */
import { globMatcher, isToolKeyGlob } from '../shared/glob.js';
import type { Tool } from '@modelcontextprotocol/client';

/** What a `tools` entry may set (the schema's `toolOverride`). */
export interface ToolSettings {
  readonly timeoutMs?: number;
  readonly readOnly?: boolean;
  readonly disabled?: boolean;
  readonly verdictFromText?: boolean;
  readonly description?: string;
  readonly title?: string;
  readonly annotations?: Record<string, unknown>;
}

export class ToolSettingsTable {
  private readonly globs: { matches: (name: string) => boolean; settings: ToolSettings }[] = [];
  private readonly exact: ReadonlyMap<string, ToolSettings>;
  /** Merged settings by the upstream's tool name, then the advertised name (no key built per lookup: this runs three or four times a call). */
  private readonly cache = new Map<string, Map<string, ToolSettings>>();

  constructor(entries: Readonly<Record<string, ToolSettings>>) {
    const exact = new Map<string, ToolSettings>();
    for (const [key, settings] of Object.entries(entries)) {
      if (isToolKeyGlob(key)) this.globs.push({ matches: globMatcher(key), settings });
      else exact.set(key, settings);
    }
    this.exact = exact;
  }

  /** The merged settings of the tool the upstream calls `toolName`, advertised as `advertised`. */
  for(toolName: string, advertised: string): ToolSettings {
    let byAdvertised = this.cache.get(toolName);
    if (!byAdvertised) this.cache.set(toolName, (byAdvertised = new Map()));
    let merged = byAdvertised.get(advertised);
    if (!merged) {
      const parts = [
        ...this.globs.filter((g) => g.matches(toolName) || g.matches(advertised)).map((g) => g.settings),
        advertised !== toolName ? this.exact.get(advertised) : undefined,
        this.exact.get(toolName),
      ];
      merged = Object.assign({}, ...parts.filter(Boolean)) as ToolSettings;
      byAdvertised.set(advertised, merged);
    }
    return merged;
  }

  /** `tool` with the configured `description`, `title` and `annotations` laid over it (annotations merged). */
  present(tool: Tool, toolName: string): Tool {
    const s = this.for(toolName, tool.name);
    if (s.description === undefined && s.title === undefined && s.annotations === undefined) return tool;
    return {
      ...tool,
      ...(s.description !== undefined ? { description: s.description } : {}),
      ...(s.title !== undefined ? { title: s.title } : {}),
      ...(s.annotations !== undefined ? { annotations: { ...tool.annotations, ...s.annotations } } : {}),
    };
  }
}
