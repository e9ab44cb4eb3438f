/**
 * The roster: every upstream's tools, prompts, resources and resource templates merged under
 * advertised names (DESIGN.md "Contract"; cases F13, F14, F15). Built from the upstreams in
 * config order; routing is by table, never by splitting names. Schemas pass through unchanged.
 */
import { createHash } from 'node:crypto';
import type { Prompt, Resource, ResourceTemplateType, Tool } from '@modelcontextprotocol/client';
import { advertisedName } from './naming.js';

/** One upstream tool under its advertised name. */
export interface RosterTool {
  /** Advertised name. */
  readonly name: string;
  /** Server key. */
  readonly server: string;
  /** The upstream's own name. */
  readonly toolName: string;
  /** The definition as advertised (upstream's, with `name` replaced). */
  readonly definition: Tool;
  /** sha256 of every field of {@link definition}, canonicalised ({@link toolHash}; tool pinning). */
  readonly hash: string;
  /** The digest of store schema 1 ({@link legacyToolHash}), to upgrade a pin stored by it. */
  readonly legacyHash: string;
}

export interface RosterPrompt {
  readonly name: string;
  readonly server: string;
  readonly promptName: string;
  readonly definition: Prompt;
}

/** Two upstream items that would be advertised under one name. */
export interface NameCollision {
  readonly kind: 'tool' | 'prompt';
  readonly name: string;
  /** `server/originalName` of the one kept and the one withheld. */
  readonly kept: string;
  readonly withheld: string;
}

/** What an upstream contributes to the roster. */
export interface RosterSource {
  readonly server: string;
  /** Prefix; '' for bare names. */
  readonly prefix: string;
  readonly tools: readonly Tool[];
  readonly prompts: readonly Prompt[];
  readonly resources: readonly Resource[];
  readonly resourceTemplates: readonly ResourceTemplateType[];
  /** Whether the tool (the upstream's own name, the advertised name) is configured `disabled`. */
  readonly isDisabled?: (toolName: string, advertised: string) => boolean;
}

export class Roster {
  readonly tools = new Map<string, RosterTool>();
  readonly prompts = new Map<string, RosterPrompt>();
  /** Resource URI → server key. */
  readonly resources = new Map<string, { server: string; resource: Resource }>();
  readonly resourceTemplates: { server: string; template: ResourceTemplateType }[] = [];
  readonly collisions: NameCollision[] = [];
  /** Advertised tool names configured `disabled`: refused as `unregistered`, never listed. */
  readonly disabled = new Map<string, { server: string; toolName: string }>();

  /** Builds a roster from sources in config order; the first claimant of a name keeps it. */
  static build(sources: readonly RosterSource[]): Roster {
    const roster = new Roster();
    for (const source of sources) roster.add(source);
    return roster;
  }

  private add(source: RosterSource): void {
    for (const tool of source.tools) {
      const name = advertisedName(source.prefix, tool.name);
      if (source.isDisabled?.(tool.name, name)) {
        this.disabled.set(name, { server: source.server, toolName: tool.name });
        continue;
      }
      const existing = this.tools.get(name);
      if (existing) {
        this.collisions.push({ kind: 'tool', name, kept: `${existing.server}/${existing.toolName}`, withheld: `${source.server}/${tool.name}` });
        continue;
      }
      const definition: Tool = { ...tool, name };
      this.tools.set(name, { name, server: source.server, toolName: tool.name, definition, hash: toolHash(definition), legacyHash: legacyToolHash(definition) });
    }
    for (const prompt of source.prompts) {
      const name = advertisedName(source.prefix, prompt.name);
      const existing = this.prompts.get(name);
      if (existing) {
        this.collisions.push({ kind: 'prompt', name, kept: `${existing.server}/${existing.promptName}`, withheld: `${source.server}/${prompt.name}` });
        continue;
      }
      this.prompts.set(name, { name, server: source.server, promptName: prompt.name, definition: { ...prompt, name } });
    }
    for (const resource of source.resources) {
      if (!this.resources.has(resource.uri)) this.resources.set(resource.uri, { server: source.server, resource });
    }
    for (const template of source.resourceTemplates) this.resourceTemplates.push({ server: source.server, template });
  }
}

/**
 * The pin of a tool definition: sha256 over every field of it as advertised (name, title,
 * description, input and output schemas, annotations, `_meta`, icons, and any other field an
 * upstream sends), since a downstream client may show any of them to its model. Object keys are
 * sorted and undefined members dropped, so key order never changes it.
 */
export function toolHash(tool: Tool): string {
  return createHash('sha256').update(stableJson(tool)).digest('hex');
}

/**
 * The digest pins had in store schema 1: name, description, input and output schemas and
 * annotations only. Kept to upgrade such a pin (`ObservedTool.legacyHash` in `store/`).
 */
export function legacyToolHash(tool: Tool): string {
  const { name, description, inputSchema, outputSchema, annotations } = tool;
  return createHash('sha256').update(stableJson({ name, description, inputSchema, outputSchema, annotations })).digest('hex');
}

function stableJson(value: unknown): string {
  if (value === undefined) return 'null';
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(stableJson).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${stableJson(v)}`).join(',')}}`;
}
