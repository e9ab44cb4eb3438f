/**
 * The policy decision (seed 002_7bce204a86c1c7ba.txt steps 1-3; issue 3 §1), a pure function of
 * the config and the facts about one call, so the judge can ask at once and a later approval
 * inbox can park a call on the same verdict.
 *
 * In order, the first that applies decides:
 *  1. the definition changed since it was pinned → `unregistered` (reason names `changed`);
 *  2. run mode `locked` → `denied`; run mode `read-only` and a tool that is not read-only → `denied`;
 *  3. the first `policy.rules` entry whose `tools` globs match the advertised name (and whose
 *     `principals`, when given, include the caller) gives the action; none → the tool's own
 *     default (`ToolTarget.policyDefault`, set by the router for some function tools), else
 *     `policy.default`;
 *  4. `deny` → `denied`;
 *  5. a tool that acts on what every session shares (`ToolTarget.requiresPrivilege`:
 *     `broker__reconnect` re-dials an upstream connection all sessions use), called by a principal
 *     that is not privileged ({@link isPrivilegedPrincipal}) → `denied`, unless step 3's action is
 *     `allow` from a rule that names the tool literally in `tools` (a glob such as `*` or
 *     `broker__*` is not enough; the rule may list the principal or apply to everyone);
 *  6. an operator revocation (`mcp-broker revoke`) → `ask`;
 *  7. `ask` → `allow` when an operator approved the tool (`mcp-broker approve`), else `ask`;
 *  8. `allow` with `policy.firstUse: "ask"` → `ask` until the principal's first use was approved.
 * Defaults live in `config/schema.ts` (`policySchema`).
 *
 * Prompts and resources ({@link decidePrimitive}): run mode `locked` → `denied` (`read-only`
 * lets them through: they are reads); then the first rule that covers the primitive (its
 * `prompts` or `resources` globs, or `tools` globs that cover the server's whole namespace, see
 * {@link namespaceName}) gives the action, else `policy.default`; `deny` → `denied`, `ask` → ask.
 * A resource URI is judged as sent, with its percent-encoded unreserved characters decoded, and
 * (while any rule has `resources` globs) in its canonical form against globs made canonical the
 * same way (resource-uri.ts: scheme and host in lower case, `file:///`): the strictest action
 * wins. While any rule has `resources` globs, a URI with no one reading (a `.`, `..` or empty
 * path segment, a backslash, whitespace, an encoded slash, user information) is denied
 * ({@link AMBIGUOUS_URI_SOURCE}). Globs match names starting with `.` too (shared/glob.ts).
 */
import { plainApproveCommand } from './approve-hint.js';
import { globMatcher } from '../shared/glob.js';
import { ambiguity, canonicalUri, withoutQueryOrFragment } from './resource-uri.js';
import type { PolicyConfig, PrincipalConfig } from '../config/schema.js';
import type { PinState } from '../store/store.js';

/** Everything the decision depends on besides the config. */
export interface PolicyFacts {
  /** Advertised tool name. */
  readonly name: string;
  readonly principal: string;
  /** Read-only per `annotations.readOnlyHint`, a per-tool `readOnly` or `policy.readOnly`. */
  readonly readOnly: boolean;
  /** Against the stored pin; `undefined` for tools that are not pinned (the broker's own). */
  readonly pin?: PinState;
  /** The operator's standing decision for this principal, if any. */
  readonly approval?: 'approved' | 'revoked';
  /** Whether the principal's first use of the tool was already approved (`policy.firstUse`). */
  readonly firstUseDone: boolean;
  /** The tool's own action when no rule matches, instead of `policy.default` (`ToolTarget.policyDefault`). */
  readonly toolDefault?: 'ask' | 'deny';
  /** The tool acts on what every session shares (`ToolTarget.requiresPrivilege`); default `false`. */
  readonly requiresPrivilege?: boolean;
  /** What makes it need privilege, after the tool's name in the denial; default "acts on what every session shares". */
  readonly privilegeReason?: string;
  /** The caller is privileged ({@link isPrivilegedPrincipal}); default `false` (fail closed). */
  readonly privileged?: boolean;
  /** The command that approves this tool for this principal, as refusals name it; default the plain `mcp-broker approve …`. */
  readonly approveCommand?: string;
}

/** Why a call must be asked about. */
export type AskGround = 'rule' | 'default' | 'first_use' | 'revoked';

export type Verdict =
  | { readonly kind: 'allow'; readonly reason: string }
  | { readonly kind: 'refuse'; readonly outcome: 'denied' | 'unregistered'; readonly reason: string }
  | { readonly kind: 'ask'; readonly ground: AskGround; readonly reason: string };

/**
 * A prompt or resource as the policy sees it. `prefix` is its server's advertised-name prefix
 * (`''` for bare names); `name` is the advertised prompt name, or the resource URI (for a
 * template completion, the `uriTemplate`).
 */
export interface PrimitiveSubject {
  readonly type: 'prompt' | 'resource';
  readonly name: string;
  readonly prefix: string;
}

/** An action and what gave it. */
export interface PolicyAction {
  action: 'allow' | 'deny' | 'ask';
  /** `policy.rules[i] (globs)` (for prompts and resources without the globs), a tool's own default, or `policy.default`. */
  source: string;
  /** Whether a rule or a default gave it (an ask's {@link AskGround}). */
  ground: 'rule' | 'default';
}

/** A policy with its globs compiled once. */
export interface CompiledPolicy {
  readonly config: PolicyConfig;
  /** Whether `policy.readOnly` lists the advertised name. */
  listedReadOnly(name: string): boolean;
  /**
   * The action for a tool name and principal (`toolDefault` when no rule matches), and what gave
   * it; `explicit` when a rule gave it and lists the name literally among its `tools`.
   */
  action(name: string, principal: string, toolDefault?: 'ask' | 'deny'): PolicyAction & { explicit: boolean };
  /** The action for a prompt or resource and principal, and what gave it. */
  primitiveAction(subject: PrimitiveSubject, principal: string): PolicyAction;
}

/**
 * Whether a principal is privileged: a configured principal by its `role` (`operator`); the
 * unconfigured `local` (the stdio client, or every HTTP caller when no principals are
 * configured) always. A configured principal named `local` goes by its role like any other.
 */
export function isPrivilegedPrincipal(principals: Readonly<Record<string, PrincipalConfig>>, principal: string): boolean {
  const configured = Object.hasOwn(principals, principal) ? principals[principal] : undefined;
  return configured ? configured.role === 'operator' : principal === 'local';
}

/**
 * The name a `tools` glob must match to cover every prompt and resource of a server: its prefix
 * and the separator with nothing after them (`evil__`; `__` for bare names). `evil__*` and `*`
 * match it; a glob naming some tools (`evil__write_*`) does not.
 */
export function namespaceName(prefix: string): string {
  return `${prefix}__`;
}

type Matcher = (name: string) => boolean;
const compile = (globs: readonly string[] | undefined): Matcher | undefined => (globs ? globMatcher(globs) : undefined);

export function compilePolicy(config: PolicyConfig): CompiledPolicy {
  const rules = config.rules.map((rule, index) => ({
    index,
    tools: compile(rule.tools),
    prompts: compile(rule.prompts),
    resources: compile(rule.resources),
    // The same globs as the URIs judged beside them: scheme and host in lower case, `file:///` (resource-uri.ts).
    canonicalResources: compile(rule.resources?.map(canonicalUri)),
    principals: rule.principals ? new Set(rule.principals) : undefined,
    action: rule.action,
    literal: new Set(rule.tools ?? []),
    label: [...(rule.tools ?? []), ...(rule.prompts ?? []), ...(rule.resources ?? [])].join(', '),
  }));
  const readOnly = config.readOnly.length ? globMatcher(config.readOnly) : () => false;
  const judgesResources = rules.some((rule) => rule.resources !== undefined);
  // `labelled`: the source shows the rule's globs; not for prompts and resources, whose URI globs may name host paths.
  type Rule = (typeof rules)[number];
  const first = (principal: string, labelled: boolean, covers: (rule: Rule) => boolean | undefined): (PolicyAction & { rule: Rule }) | undefined => {
    for (const rule of rules) {
      if (rule.principals && !rule.principals.has(principal)) continue;
      if (covers(rule)) return { action: rule.action, source: `policy.rules[${rule.index}]${labelled ? ` (${rule.label})` : ''}`, ground: 'rule', rule };
    }
    return undefined;
  };
  return {
    config,
    listedReadOnly: (name) => readOnly(name),
    action(name, principal, toolDefault) {
      const ruled = first(principal, true, (rule) => rule.tools?.(name));
      if (ruled) return { ...ruled, explicit: ruled.rule.literal.has(name) };
      if (toolDefault) return { action: toolDefault, source: `the default of "${name}"`, ground: 'default', explicit: false };
      return { action: config.default, source: 'policy.default', ground: 'default', explicit: false };
    },
    primitiveAction(subject, principal) {
      const whole = namespaceName(subject.prefix);
      const actionOn = (name: string, own: 'prompts' | 'resources' | 'canonicalResources'): PolicyAction => {
        const ruled = first(principal, false, (rule) => rule[own]?.(name) || rule.tools?.(whole));
        return ruled ? { action: ruled.action, source: ruled.source, ground: ruled.ground } : { action: config.default, source: 'policy.default', ground: 'default' };
      };
      if (subject.type === 'prompt') return actionOn(subject.name, 'prompts');
      // A `file` URI names a file, whatever follows it: judged as the file alone, so an allow of
      // `*.txt` under `default: "deny"` lets no `key.pem?.txt` through.
      const fileOnly = withoutQueryOrFragment(subject.name);
      if (fileOnly !== subject.name && judgesResources && canonicalUri(fileOnly).startsWith('file:')) return this.primitiveAction({ ...subject, name: fileOnly }, principal);
      const decoded = decodeUnreserved(subject.name);
      const unclear = judgesResources ? ambiguity(decoded) : undefined;
      if (unclear) return { action: 'deny', source: `${AMBIGUOUS_URI_SOURCE}: ${unclear}`, ground: 'rule' };
      // The URI as sent, with its unreserved characters decoded, and in its canonical form name
      // the same resource: the strictest action of the three.
      const asSent = actionOn(subject.name, 'resources');
      const both = decoded === subject.name ? asSent : stricter(asSent, actionOn(decoded, 'resources'));
      if (!judgesResources) return both;
      let judged = stricter(both, actionOn(canonicalUri(decoded), 'canonicalResources'));
      // Without its query and fragment it is the resource an upstream that ignores them reads (a
      // file server: `…/key.txt?x` is `…/key.txt`): what a rule says of that counts too, by rules
      // only, since another scheme's query may name another resource (`default: "deny"` would
      // refuse a URI an allow rule names with its query). A `file` URI was judged bare above.
      const bare = withoutQueryOrFragment(decoded);
      if (bare !== decoded) {
        for (const ofBare of [actionOn(bare, 'resources'), actionOn(canonicalUri(bare), 'canonicalResources')]) {
          if (ofBare.ground === 'rule') judged = stricter(judged, ofBare);
        }
      }
      return judged;
    },
  };
}

/**
 * Why a resource URI with no one reading (resource-uri.ts `ambiguity`: a `.` or `..` path
 * segment, an empty one, a backslash, whitespace, an encoded slash, user information) is refused
 * while any rule has `resources` globs: what it names depends on how its upstream resolves it
 * (`file:///srv/public/../secrets/key` and `file:///srv/public\..\secrets\key` are under no
 * `file:///srv/secrets/**`), so no rule can be said to cover it or not.
 */
export const AMBIGUOUS_URI_SOURCE = 'a resource URI its upstream may read as another (refused while policy.rules judge resources; send the URI as the upstream lists it)';

/** RFC 3986 §2.3: these characters mean the same percent-encoded or not. */
const UNRESERVED = /^[A-Za-z0-9\-._~]$/;

/** `uri` with its percent-encoded unreserved characters decoded (RFC 3986 §6.2.2.2): `%2e` → `.`, `%73` → `s`. */
function decodeUnreserved(uri: string): string {
  if (!uri.includes('%')) return uri;
  return uri.replace(/%([0-9A-Fa-f]{2})/g, (encoded, hex: string) => {
    const c = String.fromCharCode(Number.parseInt(hex, 16));
    return UNRESERVED.test(c) ? c : encoded;
  });
}

const STRICTNESS = { allow: 0, ask: 1, deny: 2 } as const;

function stricter(a: PolicyAction, b: PolicyAction): PolicyAction {
  return STRICTNESS[b.action] > STRICTNESS[a.action] ? b : a;
}

/** Decides one call. Pure: no I/O, no clock. */
export function decide(policy: CompiledPolicy, facts: PolicyFacts): Verdict {
  const { name } = facts;
  if (facts.pin === 'changed') {
    return {
      kind: 'refuse',
      outcome: 'unregistered',
      reason: `tool "${name}" changed: its definition differs from the one pinned for principal "${facts.principal}"; run \`${facts.approveCommand ?? plainApproveCommand(name, facts.principal)}\` to accept the new definition for it`,
    };
  }
  const mode = policy.config.mode;
  if (mode === 'locked') return { kind: 'refuse', outcome: 'denied', reason: 'run mode is locked: no tool runs' };
  if (mode === 'read-only' && !facts.readOnly) {
    return { kind: 'refuse', outcome: 'denied', reason: `run mode is read-only and "${name}" is not a read-only tool` };
  }
  const { action, source, ground, explicit } = policy.action(name, facts.principal, facts.toolDefault);
  if (action === 'deny') return { kind: 'refuse', outcome: 'denied', reason: `${source} denies "${name}"` };
  if (facts.requiresPrivilege && !facts.privileged && !(action === 'allow' && explicit)) {
    return {
      kind: 'refuse',
      outcome: 'denied',
      reason: `"${name}" ${facts.privilegeReason ?? 'acts on what every session shares'}: principal "${facts.principal}" needs the operator role, or a policy.rules entry that allows "${name}" by name`,
    };
  }
  if (facts.approval === 'revoked') return { kind: 'ask', ground: 'revoked', reason: `approval of "${name}" was revoked` };
  if (action === 'ask') {
    if (facts.approval === 'approved') return { kind: 'allow', reason: `${source} says ask; an operator approved "${name}"` };
    return { kind: 'ask', ground, reason: `${source} says ask` };
  }
  if (policy.config.firstUse === 'ask' && !facts.firstUseDone && facts.approval !== 'approved') {
    return { kind: 'ask', ground: 'first_use', reason: `first use of "${name}" by principal "${facts.principal}" needs approval (policy.firstUse)` };
  }
  return { kind: 'allow', reason: `${source} allows "${name}"` };
}

/**
 * Decides one `prompts/get`, `resources/read`, `resources/subscribe` or `completion/complete`
 * (see the file comment). Pure. `what` names the primitive in the reason without its URI or
 * arguments (`the prompt "evil__greet"`, `a resource of "evil"`).
 */
export function decidePrimitive(policy: CompiledPolicy, subject: PrimitiveSubject, principal: string, what: string): Verdict {
  if (policy.config.mode === 'locked') return { kind: 'refuse', outcome: 'denied', reason: 'run mode is locked: nothing is served' };
  const { action, source, ground } = policy.primitiveAction(subject, principal);
  if (action === 'deny') return { kind: 'refuse', outcome: 'denied', reason: `${source} denies ${what} to principal "${principal}"` };
  if (action === 'ask') return { kind: 'ask', ground, reason: `${source} says ask` };
  return { kind: 'allow', reason: `${source} allows ${what}` };
}

/** A policy that a config reload can replace in place: every holder sees the new rules on its next decision. */
export interface LivePolicy extends CompiledPolicy {
  /** Compiles `config` and makes it the policy from now on. */
  replace(config: PolicyConfig): void;
}

/**
 * The name several tools (or prompts) of one upstream would share, for one of them advertised
 * under a name of its own (upstream/naming.ts `advertisedNames`: `s__a_b_1a2b3c4d` for `a.b`
 * beside `a_b`); undefined for any other name.
 */
export interface SharedNames {
  tool(advertised: string): string | undefined;
  prompt(advertised: string): string | undefined;
}

/**
 * Wraps {@link compilePolicy} so the gateway's stages, guards and lists share one replaceable policy.
 * With `shared`, a tool or prompt advertised under a name of its own because its name would be
 * another's too is also judged under that shared name, by rules only, and the stricter action
 * counts: a rule written for `s__a_b` still covers the tool that had that name after the upstream
 * lists a sibling that sanitises alike (both are then renamed), never less.
 */
export function livePolicy(config: PolicyConfig, shared?: SharedNames): LivePolicy {
  let current = compilePolicy(config);
  return {
    get config() {
      return current.config;
    },
    listedReadOnly: (name) => current.listedReadOnly(name),
    action: (name, principal, toolDefault) => {
      const own = current.action(name, principal, toolDefault);
      const other = shared?.tool(name);
      if (other === undefined) return own;
      const ofShared = current.action(other, principal, toolDefault);
      return ofShared.ground === 'rule' && STRICTNESS[ofShared.action] > STRICTNESS[own.action] ? { ...ofShared, explicit: false } : own;
    },
    primitiveAction: (subject, principal) => {
      const own = current.primitiveAction(subject, principal);
      const other = subject.type === 'prompt' ? shared?.prompt(subject.name) : undefined;
      if (other === undefined) return own;
      const ofShared = current.primitiveAction({ ...subject, name: other }, principal);
      return ofShared.ground === 'rule' ? stricter(own, ofShared) : own;
    },
    replace(next) {
      current = compilePolicy(next);
    },
  };
}
