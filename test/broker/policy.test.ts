import { describe, expect, it } from 'vitest';
import { compilePolicy, decide, isPrivilegedPrincipal, type PolicyFacts } from '../../src/broker/policy.js';
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
    expect(v.reason).toContain('mcp-broker approve fs__read_file');
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
