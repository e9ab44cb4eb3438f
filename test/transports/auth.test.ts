import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LOCAL_PRINCIPAL, PrincipalAuthenticator } from '../../src/transports/http/auth.js';

const principals = {
  alice: { token: 'alice-secret-token-000000', role: 'user' as const },
  ops: { token: 'ops-secret-token-11111111', role: 'operator' as const, budgetPerUnit: 5 },
};

describe('PrincipalAuthenticator', () => {
  it('with no principals, every caller is local with role operator', () => {
    const auth = new PrincipalAuthenticator({});
    expect(auth.enabled).toBe(false);
    expect(auth.authenticate(undefined)).toEqual({ principal: LOCAL_PRINCIPAL });
    expect(auth.authenticate('Bearer whatever')).toEqual({ principal: LOCAL_PRINCIPAL });
  });

  it('maps a bearer token to its principal and role', () => {
    const auth = new PrincipalAuthenticator(principals);
    expect(auth.authenticate('Bearer alice-secret-token-000000')).toEqual({ principal: { name: 'alice', role: 'user', budgetPerUnit: undefined } });
    expect(auth.authenticate('bearer ops-secret-token-11111111')).toEqual({ principal: { name: 'ops', role: 'operator', budgetPerUnit: 5 } });
  });

  it('missing or malformed header → missing; unknown token → invalid', () => {
    const auth = new PrincipalAuthenticator(principals);
    expect(auth.authenticate(undefined)).toEqual({ failure: 'missing' });
    expect(auth.authenticate('')).toEqual({ failure: 'missing' });
    expect(auth.authenticate('Basic alice-secret-token-000000')).toEqual({ failure: 'missing' });
    expect(auth.authenticate('Bearer')).toEqual({ failure: 'missing' });
    expect(auth.authenticate('Bearer alice-secret-token-00000')).toEqual({ failure: 'invalid' });
    expect(auth.authenticate('Bearer alice-secret-token-0000000')).toEqual({ failure: 'invalid' });
  });

  it('lists principals without their tokens', () => {
    const auth = new PrincipalAuthenticator(principals);
    expect(JSON.stringify(auth.principals)).not.toContain('secret');
  });

  it('property: only the exact configured token authenticates', () => {
    const auth = new PrincipalAuthenticator(principals);
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 40 }).filter((s) => !/\s/.test(s)), (token) => {
        const result = auth.authenticate(`Bearer ${token}`);
        const expected = Object.entries(principals).find(([, p]) => p.token === token)?.[0];
        if (expected) expect(result).toMatchObject({ principal: { name: expected } });
        else expect(result).toEqual({ failure: 'invalid' });
      }),
    );
  });
});
