/**
 * The roster: every upstream's tools, prompts, resources and resource templates merged under
 * advertised names (DESIGN.md "Contract"; cases F13, F14, F15). Built from the upstreams in
 * config order; routing is by table, never by splitting names. Schemas pass through unchanged.
 *
 * Resources keep their URIs; a URI or template string is claimed by the server with the highest
 * `resourcePriority`, equal priorities by config order; the others' copies are withheld and
 * reported ({@link ResourceClash}). A URI no server lists is routed to the best matching template
 * ({@link Roster.resourceServer}).
 */
import { createHash } from 'node:crypto';
import type { Prompt, Resource, ResourceTemplateType, Tool } from '@modelcontextprotocol/client';
import { cut } from '../shared/cut.js';
import { advertisedName, advertisedNames } from './naming.js';
import { UriTemplate } from './uri-template.js';

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

/**
 * Most characters of a `server/originalName` a {@link NameCollision} names, `…` marking a cut: the
 * original name is the upstream's, of any length, and a collision is shown (the error that refuses
 * a start, a logged error), never looked up.
 */
export const SHOWN_COLLISION_NAME_MAX_CHARS = 200;

/** Items of two upstreams that would be advertised under one name (one upstream's are told apart: naming.ts `advertisedNames`). */
export interface NameCollision {
  readonly kind: 'tool' | 'prompt';
  readonly name: string;
  /**
   * `server/originalName` of the one kept and the one withheld, as the upstreams listed them
   * (scrubbed, registry.ts), cut at {@link SHOWN_COLLISION_NAME_MAX_CHARS}.
   */
  readonly kept: string;
  readonly withheld: string;
}

/** Two upstreams serving one resource URI (`resource`) or one template string (`resourceTemplate`). */
export interface ResourceClash {
  readonly kind: 'resource' | 'resourceTemplate';
  /** The URI or template string. */
  readonly uri: string;
  /** Server keys: the one serving it, and the one whose copy is withheld. */
  readonly kept: string;
  readonly withheld: string;
}

/** A resource template in the roster, with its parsed form (undefined: not RFC 6570, so it routes no URI). */
export interface RosterTemplate {
  readonly server: string;
  readonly template: ResourceTemplateType;
  readonly parsed: UriTemplate | undefined;
  /** The server's `resourcePriority`. */
  readonly priority: number;
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
  /** Which server serves a resource URI or template that several list: the highest; default 0. */
  readonly resourcePriority?: number;
}

export class Roster {
  readonly tools = new Map<string, RosterTool>();
  readonly prompts = new Map<string, RosterPrompt>();
  /** Resource URI → server key. */
  readonly resources = new Map<string, { server: string; resource: Resource }>();
  /** One entry per template string, in claim order (priority, then config order). */
  readonly resourceTemplates: RosterTemplate[] = [];
  readonly collisions: NameCollision[] = [];
  /** Resource URIs and templates listed by more than one server. */
  readonly resourceClashes: ResourceClash[] = [];
  /** Advertised tool names configured `disabled`: refused as `unregistered`, never listed. */
  readonly disabled = new Map<string, { server: string; toolName: string }>();
  /**
   * Advertised name → the name it would share with a sibling of its upstream (naming.ts
   * `advertisedNames`), for tools and prompts told apart by a hash suffix: the policy and the
   * `disabled` setting judge them under that name too.
   */
  readonly sharedToolNames = new Map<string, string>();
  readonly sharedPromptNames = new Map<string, string>();

  /** Builds a roster from sources in config order; the first claimant of a name keeps it. */
  static build(sources: readonly RosterSource[]): Roster {
    const roster = new Roster();
    for (const source of sources) roster.add(source);
    // Stable sort: equal priorities keep config order.
    const claimOrder = [...sources].sort((a, b) => (b.resourcePriority ?? 0) - (a.resourcePriority ?? 0));
    for (const source of claimOrder) roster.addResources(source);
    return roster;
  }

  /**
   * The server serving a resource URI: the one listing it; else the best template it is an
   * expansion of (RFC 6570, every level), ranked by the server's `resourcePriority`, then the
   * template's literal length (the more specific), then config order. Undefined: none.
   */
  resourceServer(uri: string): string | undefined {
    const exact = this.resources.get(uri);
    if (exact) return exact.server;
    let best: RosterTemplate | undefined;
    for (const t of this.resourceTemplates) {
      if (best && (t.priority < best.priority || (t.priority === best.priority && (t.parsed?.literalLength ?? 0) <= best.parsed!.literalLength))) continue;
      if (t.parsed?.match(uri)) best = t;
    }
    return best?.server;
  }

  /** The server whose resource template this exact template string is (a `ref/resource` completion); undefined: none. */
  templateServer(uriTemplate: string): string | undefined {
    return this.resourceTemplates.find((t) => t.template.uriTemplate === uriTemplate)?.server;
  }

  private addResources(source: RosterSource): void {
    const priority = source.resourcePriority ?? 0;
    for (const resource of source.resources) {
      const existing = this.resources.get(resource.uri);
      if (!existing) this.resources.set(resource.uri, { server: source.server, resource });
      else if (existing.server !== source.server) this.clash('resource', resource.uri, existing.server, source.server);
    }
    for (const template of source.resourceTemplates) {
      const existing = this.resourceTemplates.find((t) => t.template.uriTemplate === template.uriTemplate);
      if (!existing) this.resourceTemplates.push({ server: source.server, template, parsed: UriTemplate.parse(template.uriTemplate), priority });
      else if (existing.server !== source.server) this.clash('resourceTemplate', template.uriTemplate, existing.server, source.server);
    }
  }

  private clash(kind: ResourceClash['kind'], uri: string, kept: string, withheld: string): void {
    if (!this.resourceClashes.some((c) => c.kind === kind && c.uri === uri && c.withheld === withheld)) this.resourceClashes.push({ kind, uri, kept, withheld });
  }

  private add(source: RosterSource): void {
    const toolNames = advertisedNames(source.prefix, source.tools.map((t) => t.name));
    for (const [i, tool] of source.tools.entries()) {
      const name = toolNames[i]!;
      const plain = advertisedName(source.prefix, tool.name);
      const shared = plain === name ? undefined : plain;
      if (source.isDisabled?.(tool.name, name) || (shared !== undefined && source.isDisabled?.(tool.name, shared))) {
        this.disabled.set(name, { server: source.server, toolName: tool.name });
        continue;
      }
      const existing = this.tools.get(name);
      if (existing) {
        this.collisions.push({ kind: 'tool', name, kept: shownOriginal(existing.server, existing.toolName), withheld: shownOriginal(source.server, tool.name) });
        continue;
      }
      const definition: Tool = { ...tool, name };
      this.tools.set(name, { name, server: source.server, toolName: tool.name, definition, hash: toolHash(definition), legacyHash: legacyToolHash(definition) });
      if (shared !== undefined) this.sharedToolNames.set(name, shared);
    }
    const promptNames = advertisedNames(source.prefix, source.prompts.map((p) => p.name));
    for (const [i, prompt] of source.prompts.entries()) {
      const name = promptNames[i]!;
      const existing = this.prompts.get(name);
      if (existing) {
        this.collisions.push({ kind: 'prompt', name, kept: shownOriginal(existing.server, existing.promptName), withheld: shownOriginal(source.server, prompt.name) });
        continue;
      }
      this.prompts.set(name, { name, server: source.server, promptName: prompt.name, definition: { ...prompt, name } });
      const plain = advertisedName(source.prefix, prompt.name);
      if (plain !== name) this.sharedPromptNames.set(name, plain);
    }
  }
}

/** `server/originalName` as a {@link NameCollision} names it: cut at {@link SHOWN_COLLISION_NAME_MAX_CHARS}. */
function shownOriginal(server: string, original: string): string {
  return cut(`${server}/${original}`, SHOWN_COLLISION_NAME_MAX_CHARS);
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

/** JSON with object keys sorted and undefined members dropped: equal values give equal text. */
export function stableJson(value: unknown): string {
  if (value === undefined) return 'null';
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(stableJson).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${stableJson(v)}`).join(',')}}`;
}
