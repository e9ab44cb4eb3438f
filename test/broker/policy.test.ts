import { describe, expect, it } from 'vitest';
import { compilePolicy, livePolicy, decide, decidePrimitive, isPrivilegedPrincipal, type PolicyFacts, type PrimitiveSubject } from '../../src/broker/policy.js';
import { principalSchema, policySchema } from '../../src/config/schema.js';

const facts = (over: Partial<PolicyFacts> = {}): PolicyFacts => ({ name: 'fs__read_file', principal: 'local', readOnly: false, pin: 'same', firstUseDone: true, ...over });
const policy = (raw: unknown = {}) => compilePolicy(policySchema.parse(raw));

describe('decide (policy.ts)', () => {
  it('allows by default', () => {
    expect(decide(policy(), facts())).toMatchObject({ kind: 'allow' });
  });

  it('a changed pin is unregistered, whatever the policy, and says how to approve', () => {
    const v = decide(policy({ default: 'allow' }), facts({ pin: 'changed' }));
    expect(v).toMatchObject({ kind: 'refuse', outcome: 'unregistered' });
    expect(v.reason).toContain('changed');
    expect(v.reason).toContain('mcp-broker approve fs__read_file --principal local');
  });

  it('first match of ordered rules wins; globs match advertised names', () => {
    const p = policy({ rules: [{ tools: ['fs__write_*'], action: 'deny' }, { tools: ['fs__*'], action: 'ask' }] });
    expect(decide(p, facts({ name: 'fs__write_file' }))).toMatchObject({ kind: 'refuse', outcome: 'denied' });
    expect(decide(p, facts({ name: 'fs__read_file' }))).toMatchObject({ kind: 'ask', ground: 'rule' });
    expect(decide(p, facts({ name: 'memory__read_graph' }))).toMatchObject({ kind: 'allow' });
    expect(decide(p, facts({ name: 'fs__write_file' })).reason).toContain('policy.rules[0]');
  });

  it('a rule with principals applies only to them', () => {
    const p = policy({ rules: [{ tools: ['*'], principals: ['ci-bot'], action: 'deny' }] });
    expect(decide(p, facts({ principal: 'ci-bot' }))).toMatchObject({ kind: 'refuse', outcome: 'denied' });
    expect(decide(p, facts({ principal: 'local' }))).toMatchObject({ kind: 'allow' });
  });

  it('default ask and deny', () => {
    expect(decide(policy({ default: 'ask' }), facts())).toMatchObject({ kind: 'ask', ground: 'default' });
    expect(decide(policy({ default: 'deny' }), facts())).toMatchObject({ kind: 'refuse', outcome: 'denied' });
  });

  it("a tool's own default replaces policy.default, never a matching rule", () => {
    expect(decide(policy({ default: 'allow' }), facts({ toolDefault: 'ask' }))).toMatchObject({ kind: 'ask' });
    const p = policy({ rules: [{ tools: ['fs__read_file'], action: 'allow' }] });
    expect(decide(p, facts({ toolDefault: 'ask' }))).toMatchObject({ kind: 'allow' });
  });

  it('run mode locked denies everything; read-only denies tools that are not read-only', () => {
    expect(decide(policy({ mode: 'locked' }), facts({ readOnly: true }))).toMatchObject({ kind: 'refuse', outcome: 'denied' });
    expect(decide(policy({ mode: 'read-only' }), facts({ readOnly: false }))).toMatchObject({ kind: 'refuse', outcome: 'denied' });
    expect(decide(policy({ mode: 'read-only' }), facts({ readOnly: true }))).toMatchObject({ kind: 'allow' });
  });

  it('listedReadOnly matches policy.readOnly globs', () => {
    const p = policy({ readOnly: ['fs__read_*', 'memory__search_nodes'] });
    expect(p.listedReadOnly('fs__read_file')).toBe(true);
    expect(p.listedReadOnly('memory__search_nodes')).toBe(true);
    expect(p.listedReadOnly('fs__write_file')).toBe(false);
  });

  it('an operator approval satisfies ask; a revocation makes an allowed tool ask; deny still denies', () => {
    const p = policy({ rules: [{ tools: ['fs__*'], action: 'ask' }, { tools: ['x__*'], action: 'deny' }] });
    expect(decide(p, facts({ approval: 'approved' }))).toMatchObject({ kind: 'allow' });
    expect(decide(policy(), facts({ approval: 'revoked' }))).toMatchObject({ kind: 'ask', ground: 'revoked' });
    expect(decide(p, facts({ name: 'x__y', approval: 'approved' }))).toMatchObject({ kind: 'refuse', outcome: 'denied' });
  });

  it('firstUse ask asks until the first use was approved (or an operator approved)', () => {
    const p = policy({ firstUse: 'ask' });
    expect(decide(p, facts({ firstUseDone: false }))).toMatchObject({ kind: 'ask', ground: 'first_use' });
    expect(decide(p, facts({ firstUseDone: true }))).toMatchObject({ kind: 'allow' });
    expect(decide(p, facts({ firstUseDone: false, approval: 'approved' }))).toMatchObject({ kind: 'allow' });
  });

  describe('issue 12: a tool acting on shared upstreams (requiresPrivilege)', () => {
    const shared = (over: Partial<PolicyFacts> = {}) => facts({ name: 'broker__reconnect', principal: 'alice', requiresPrivilege: true, ...over });

    it('a plain user without an explicit allow is denied, even under policy.default allow', () => {
      const v = decide(policy({ default: 'allow' }), shared());
      expect(v).toMatchObject({ kind: 'refuse', outcome: 'denied' });
      expect(v.reason).toContain('operator');
      expect(v.reason).toContain('broker__reconnect');
      // Not privileged is the default when the fact is absent (fail closed).
      expect(decide(policy(), shared({ privileged: undefined }))).toMatchObject({ kind: 'refuse', outcome: 'denied' });
    });

    it('a glob allow is not an explicit allow; a rule naming the tool is, for the principals it covers', () => {
      expect(decide(policy({ rules: [{ tools: ['*'], action: 'allow' }] }), shared())).toMatchObject({ kind: 'refuse', outcome: 'denied' });
      expect(decide(policy({ rules: [{ tools: ['broker__*'], principals: ['alice'], action: 'allow' }] }), shared())).toMatchObject({ kind: 'refuse', outcome: 'denied' });
      const named = policy({ rules: [{ tools: ['broker__reconnect'], principals: ['alice'], action: 'allow' }] });
      expect(decide(named, shared())).toMatchObject({ kind: 'allow' });
      expect(decide(named, shared({ principal: 'bob' }))).toMatchObject({ kind: 'refuse', outcome: 'denied' });
      expect(decide(policy({ rules: [{ tools: ['broker__reconnect'], action: 'allow' }] }), shared({ principal: 'bob' }))).toMatchObject({ kind: 'allow' });
      // The first matching rule decides: a glob allow before the named one hides it.
      const hidden = policy({ rules: [{ tools: ['broker__*'], action: 'allow' }, { tools: ['broker__reconnect'], action: 'allow' }] });
      expect(decide(hidden, shared())).toMatchObject({ kind: 'refuse', outcome: 'denied' });
      // An explicit ask is not an allow.
      expect(decide(policy({ rules: [{ tools: ['broker__reconnect'], action: 'ask' }] }), shared())).toMatchObject({ kind: 'refuse', outcome: 'denied' });
    });

    it('a privileged principal goes by the ordinary policy: allowed by default, still denied by a rule and by run mode', () => {
      expect(decide(policy(), shared({ privileged: true }))).toMatchObject({ kind: 'allow' });
      expect(decide(policy({ rules: [{ tools: ['broker__reconnect'], action: 'deny' }] }), shared({ privileged: true }))).toMatchObject({ kind: 'refuse', outcome: 'denied' });
      expect(decide(policy({ mode: 'locked' }), shared({ privileged: true }))).toMatchObject({ kind: 'refuse', outcome: 'denied' });
      expect(decide(policy({ mode: 'locked', rules: [{ tools: ['broker__reconnect'], action: 'allow' }] }), shared())).toMatchObject({ kind: 'refuse', outcome: 'denied' });
    });

    it('isPrivilegedPrincipal: role operator, or the unconfigured local; a configured "local" goes by its role', () => {
      const p = (role: string) => principalSchema.parse({ token: 't'.repeat(16), role });
      const principals = { ops: p('operator'), alice: p('user') };
      expect(isPrivilegedPrincipal(principals, 'ops')).toBe(true);
      expect(isPrivilegedPrincipal(principals, 'alice')).toBe(false);
      expect(isPrivilegedPrincipal(principals, 'local')).toBe(true);
      expect(isPrivilegedPrincipal({ local: p('user') }, 'local')).toBe(false);
      expect(isPrivilegedPrincipal(principals, 'toString')).toBe(false);
    });
  });
});

describe('decidePrimitive (policy.ts): prompts and resources', () => {
  const prompt = (name: string, prefix = 'evil'): PrimitiveSubject => ({ type: 'prompt', name, prefix });
  const resource = (name: string, prefix = 'evil'): PrimitiveSubject => ({ type: 'resource', name, prefix });
  const judge = (p: ReturnType<typeof policy>, subject: PrimitiveSubject, principal = 'bob') => decidePrimitive(p, subject, principal, 'it');

  it('a tools rule denying a server by prefix (evil__*) denies its prompts and resources to that principal only', () => {
    const p = policy({ rules: [{ tools: ['evil__*'], principals: ['bob'], action: 'deny' }] });
    expect(judge(p, prompt('evil__greet'))).toMatchObject({ kind: 'refuse', outcome: 'denied' });
    expect(judge(p, resource('file:///etc/passwd'))).toMatchObject({ kind: 'refuse', outcome: 'denied' });
    expect(judge(p, resource('evil://item/{id}'))).toMatchObject({ kind: 'refuse', outcome: 'denied' });
    expect(judge(p, prompt('evil__greet'), 'alice')).toMatchObject({ kind: 'allow' });
    expect(judge(p, prompt('good__greet', 'good'))).toMatchObject({ kind: 'allow' });
    expect(judge(policy({ rules: [{ tools: ['*'], action: 'deny' }] }), resource('x://y', ''))).toMatchObject({ kind: 'refuse' });
  });

  it('a tools glob naming some tools of a server does not cover its prompts or resources', () => {
    const p = policy({ rules: [{ tools: ['evil__greet', 'evil__write_*'], action: 'deny' }] });
    expect(judge(p, prompt('evil__greet'))).toMatchObject({ kind: 'allow' });
    expect(judge(p, resource('evil://doc'))).toMatchObject({ kind: 'allow' });
  });

  it('prompts and resources globs name them, and leave tools alone', () => {
    const p = policy({
      rules: [
        { prompts: ['evil__gr*'], action: 'ask' },
        { resources: ['file:///etc/**'], action: 'deny' },
      ],
    });
    expect(judge(p, prompt('evil__greet'))).toMatchObject({ kind: 'ask', ground: 'rule' });
    expect(judge(p, prompt('evil__other'))).toMatchObject({ kind: 'allow' });
    expect(judge(p, resource('file:///etc/ssh/sshd_config'))).toMatchObject({ kind: 'refuse', outcome: 'denied' });
    expect(judge(p, resource('file:///home/a'))).toMatchObject({ kind: 'allow' });
    expect(decide(p, facts({ name: 'evil__greet' }))).toMatchObject({ kind: 'allow' });
  });

  it('a refusal names the rule by index, never its globs (a URI glob may be a host path)', () => {
    const v = judge(policy({ rules: [{ resources: ['file:///home/alice/**'], action: 'deny' }] }), resource('file:///home/alice/x'));
    expect(v.reason).toContain('policy.rules[0]');
    expect(v.reason).not.toContain('/home/alice');
  });

  it('policy.default applies; locked denies everything; read-only lets them through (they are reads)', () => {
    expect(judge(policy({ default: 'deny' }), prompt('evil__greet'))).toMatchObject({ kind: 'refuse', outcome: 'denied' });
    expect(judge(policy({ default: 'ask' }), resource('evil://doc'))).toMatchObject({ kind: 'ask', ground: 'default' });
    expect(judge(policy({ mode: 'locked' }), prompt('evil__greet'))).toMatchObject({ kind: 'refuse', outcome: 'denied' });
    expect(judge(policy({ mode: 'read-only' }), resource('evil://doc'))).toMatchObject({ kind: 'allow' });
  });

  it('a rule must name tools, prompts or resources; a tools-only rule is valid as before', () => {
    expect(policySchema.safeParse({ rules: [{ action: 'deny' }] }).success).toBe(false);
    expect(policySchema.safeParse({ rules: [{ principals: ['bob'], action: 'deny' }] }).success).toBe(false);
    expect(policySchema.safeParse({ rules: [{ tools: ['x__*'], action: 'deny' }] }).success).toBe(true);
    expect(policySchema.safeParse({ rules: [{ prompts: ['x__*'], resources: ['x://**'], action: 'allow' }] }).success).toBe(true);
  });
});

describe('resource URIs: every spelling of a name under a rule is covered', () => {
  const policy = (rules: unknown[]) => compilePolicy(policySchema.parse({ rules }));
  const action = (p: ReturnType<typeof policy>, name: string) => p.primitiveAction({ type: 'resource', name, prefix: 'fs' }, 'bob').action;
  const denyHome = policy([{ resources: ['file:///home/u/**'], action: 'deny' }]);

  it('a glob covers names that start with "." (picomatch skips them unless told)', () => {
    expect(action(denyHome, 'file:///home/u/.ssh/id_rsa')).toBe('deny');
    expect(action(denyHome, 'file:///home/u/a/.git/config')).toBe('deny');
  });

  it('percent-encoded unreserved characters are judged decoded too; the stricter action wins', () => {
    expect(action(denyHome, 'file:///home/u/%2essh/id_rsa')).toBe('deny');
    expect(action(policy([{ resources: ['file:///srv/secret/**'], action: 'ask' }]), 'file:///srv/%73ecret/k')).toBe('ask');
    // A reserved character stays encoded; an encoded slash, which an upstream may decode into a separator, is refused.
    expect(action(policy([{ resources: ['file:///a/b'], action: 'deny' }]), 'file:///a%2Fb')).toBe('deny');
    expect(action(policy([{ resources: ['file:///a/b'], action: 'deny' }]), 'file:///a%3Fb')).toBe('allow');
  });

  it('another spelling of a denied URI is denied: scheme or host case, file://localhost/ and file:/, a default port (each was read through)', () => {
    const denySecrets = policy([{ resources: ['file:///tmp/rp/tree/secrets/**', 'up://secret/**', 'https://internal/private/**'], action: 'deny' }]);
    for (const uri of [
      'FILE:///tmp/rp/tree/secrets/key.txt',
      'file://localhost/tmp/rp/tree/secrets/key.txt',
      'file://LOCALHOST/tmp/rp/tree/secrets/key.txt',
      'file:/tmp/rp/tree/secrets/key.txt',
      'UP://secret/key',
      'up://Secret/key',
      'https://INTERNAL:443/private/x',
    ]) {
      expect(action(denySecrets, uri), uri).toBe('deny');
    }
    expect(action(denySecrets, 'file:///tmp/rp/tree/public/a.txt')).toBe('allow');
    expect(action(denySecrets, 'https://internal:8443/private/x')).toBe('allow');
    // A glob written with upper case still allows its own spelling; another spelling takes the strictest of its readings.
    const allowOnly = compilePolicy(policySchema.parse({ default: 'deny', rules: [{ resources: ['up://Secret/**'], action: 'allow' }] }));
    expect(action(allowOnly, 'up://Secret/key')).toBe('allow');
    expect(action(allowOnly, 'up://secret/key')).toBe('deny');
  });

  it('a URI with no one reading is denied while any rule judges resources: an empty segment, a backslash, whitespace, a control character, user information (each was read through)', () => {
    const denySecrets = policy([{ resources: ['file:///tmp/rp/tree/secrets/**', 'http://host/**'], action: 'deny' }]);
    for (const uri of [
      'file:///tmp/rp/tree//secrets/key.txt',
      'file:///tmp/rp/tree/public\\..\\secrets\\key.txt',
      ' file:///tmp/rp/tree/secrets/key.txt',
      'file:///tmp/rp/tree/sec\trets/key.txt',
      'file:///tmp/rp/tree/secrets/key.txt\n',
      'http://user@host/x',
      'file:///tmp/rp/tree/public%5Ckey',
    ]) {
      expect(denySecrets.primitiveAction({ type: 'resource', name: uri, prefix: 'fs' }, 'bob'), JSON.stringify(uri)).toMatchObject({ action: 'deny', source: expect.stringContaining('may read as another') });
    }
    // Without rules on resources, spellings change nothing.
    expect(action(policy([{ tools: ['fs__write'], action: 'deny' }]), 'file:///a//b')).toBe('allow');
  });

  it('a "." or ".." path segment is denied while any rule judges resources, whatever it would resolve to', () => {
    for (const uri of ['file:///srv/public/../secret/k', 'file:///home/u/./x', 'file:///x/%2e%2e/y', 'prims:..', 'file:///a/..']) {
      const p = policy([{ resources: ['file:///srv/secret/**'], action: 'deny' }]);
      expect(p.primitiveAction({ type: 'resource', name: uri, prefix: 'fs' }, 'bob')).toMatchObject({ action: 'deny', source: expect.stringContaining('".." path segments') });
    }
    // Dots that are no segment of their own, and a query, are not.
    expect(action(denyHome, 'file:///srv/a..b/c.d')).toBe('allow');
    expect(action(denyHome, 'file:///srv/x?path=../y')).toBe('allow');
  });

  it('a query or fragment does not dodge a rule: what a rule says of the URI without them holds too (a file server ignores them); the default does not', () => {
    const denyKey = policy([{ resources: ['file:///srv/secrets/key.txt', 'file:///**/*.pem'], action: 'deny' }]);
    for (const uri of ['file:///srv/secrets/key.txt?x', 'file:///srv/secrets/key.txt#x', 'file:///srv/secrets/key.txt?', 'file:///srv/public/server.pem?', 'FILE:///srv/public/server.pem#top', 'file:///srv/secrets/key.txt?a#b']) {
      expect(action(denyKey, uri), uri).toBe('deny');
    }
    expect(action(denyKey, 'file:///srv/public/a.txt?x')).toBe('allow');
    // A rule on the bare resource that asks makes its query spellings ask.
    expect(action(policy([{ resources: ['up://doc/*'], action: 'ask' }]), 'up://doc/a?rev=2')).toBe('ask');
    // An allow rule naming a URI with its query still allows it under `default: "deny"`: the bare URI is judged by rules only.
    const allowQuery = compilePolicy(policySchema.parse({ default: 'deny', rules: [{ resources: ['db://rows?table=*'], action: 'allow' }] }));
    expect(action(allowQuery, 'db://rows?table=a')).toBe('allow');
    expect(action(allowQuery, 'db://rows')).toBe('deny');
    // A file URI's bare form is judged whole: an allow-list of *.txt under default deny lets no other file through by a suffix.
    const allowTxt = compilePolicy(policySchema.parse({ default: 'deny', rules: [{ resources: ['file:///srv/docs/*.txt'], action: 'allow' }] }));
    for (const uri of ['file:///srv/docs/key.pem?.txt', 'file:///srv/docs/key.pem#.txt', 'file:///srv/docs/key.pem?x.txt']) expect(action(allowTxt, uri), uri).toBe('deny');
    expect(action(allowTxt, 'file:///srv/docs/a.txt?v=2')).toBe('allow');
    // A deny rule listed first still wins over a later allow that matches the URI with its query.
    const ordered = policy([{ resources: ['file:///pub/secret.txt'], action: 'deny' }, { resources: ['file:///pub/**'], action: 'allow' }]);
    expect(action(ordered, 'file:///pub/secret.txt?x')).toBe('deny');
    expect(action(ordered, 'file:///pub/open.txt?x')).toBe('allow');
  });

  it('without rules on resources, a ".." changes nothing (no rule could be dodged) and prompts are names, not paths', () => {
    expect(action(policy([{ tools: ['fs__write'], action: 'deny' }]), 'file:///srv/../etc/passwd')).toBe('allow');
    expect(action(policy([{ tools: ['fs__*'], action: 'deny' }]), 'file:///srv/../etc/passwd')).toBe('deny');
    const prompts = policy([{ resources: ['file:///x/**'], action: 'deny' }]);
    expect(prompts.primitiveAction({ type: 'prompt', name: 'fs__..', prefix: 'fs' }, 'bob').action).toBe('allow');
  });
});

describe('livePolicy with shared names (a tool or prompt renamed because a sibling sanitises alike)', () => {
  const shared = { tool: (n: string) => (n === 's__a_b_1' ? 's__a_b' : undefined), prompt: (n: string) => (n === 's__p_q_1' ? 's__p_q' : undefined) };
  it('judges it under the shared name too, by rules only, the stricter counting', () => {
    const live = livePolicy(policySchema.parse({ default: 'allow', rules: [{ tools: ['s__a_b'], action: 'deny' }, { prompts: ['s__p_q'], action: 'ask' }] }), shared);
    expect(live.action('s__a_b_1', 'bob').action).toBe('deny');
    expect(live.action('s__c_d', 'bob').action).toBe('allow');
    expect(live.primitiveAction({ type: 'prompt', name: 's__p_q_1', prefix: 's' }, 'bob').action).toBe('ask');
    // An allow of the shared name adds nothing: under default deny the renamed tool stays denied.
    const allowing = livePolicy(policySchema.parse({ default: 'deny', rules: [{ tools: ['s__a_b'], action: 'allow' }] }), shared);
    expect(allowing.action('s__a_b_1', 'bob').action).toBe('deny');
  });
});
