/**
 * Who is calling over HTTP: `Authorization: Bearer <token>` matched against `principals`
 * (schema `principalSchema`). Tokens are compared in constant time: each configured token is
 * hashed once (SHA-256) and the presented token's hash is compared with every one of them with
 * `crypto.timingSafeEqual`, without stopping at the first match. Tokens are never logged and
 * never appear in an answer.
 *
 * With no principals configured there is nothing to check: every caller is the principal
 * `local` with role `operator`, and the HTTP face serves loopback only (see `checkServeOptions`).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { PrincipalConfig } from '../../config/schema.js';

/** An authenticated caller. */
export interface Principal {
  /** The key in `principals`, or `local` when none are configured. */
  readonly name: string;
  /** `operator` may act on other principals' sessions and read every record. */
  readonly role: 'user' | 'operator';
  /** Overrides `broker.budgetPerUnit` for this principal's units. */
  readonly budgetPerUnit?: number | 'unlimited';
}

/** Why a request was not authenticated: no usable header, or a token no principal holds. */
export type AuthFailure = 'missing' | 'invalid';

/** The principal of every caller when no principals are configured. */
export const LOCAL_PRINCIPAL: Principal = { name: 'local', role: 'operator' };

export class PrincipalAuthenticator {
  private readonly entries: { principal: Principal; digest: Buffer }[];

  constructor(principals: Readonly<Record<string, PrincipalConfig>>) {
    this.entries = Object.entries(principals).map(([name, p]) => ({
      principal: { name, role: p.role, budgetPerUnit: p.budgetPerUnit },
      digest: digest(p.token),
    }));
  }

  /** Whether any principal is configured (else every caller is {@link LOCAL_PRINCIPAL}). */
  get enabled(): boolean {
    return this.entries.length > 0;
  }

  /** Names and roles of the configured principals (no tokens). */
  get principals(): readonly Principal[] {
    return this.entries.map((e) => e.principal);
  }

  /** The principal an `Authorization` header value names, or why there is none. */
  authenticate(authorization: string | undefined): { principal: Principal } | { failure: AuthFailure } {
    if (!this.enabled) return { principal: LOCAL_PRINCIPAL };
    const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(authorization ?? '');
    if (!match) return { failure: 'missing' };
    const presented = digest(match[1]!);
    let found: Principal | undefined;
    for (const entry of this.entries) {
      // No early exit: the time taken does not depend on which principal (if any) matched.
      if (timingSafeEqual(presented, entry.digest) && !found) found = entry.principal;
    }
    return found ? { principal: found } : { failure: 'invalid' };
  }
}

function digest(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}
