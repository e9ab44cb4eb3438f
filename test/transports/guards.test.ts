import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/shared/errors.js';
import { Scrubber } from '../../src/shared/scrub.js';
import { checkHostAndOrigin, checkServeOptions, hostnameOf, isLoopback } from '../../src/transports/http/guards.js';

const loopbackOnly = { allowedHosts: ['127.0.0.1', 'localhost', '[::1]'], allowedOrigins: [] };

describe('isLoopback / hostnameOf', () => {
  it('knows loopback addresses', () => {
    for (const h of ['127.0.0.1', '127.1.2.3', 'localhost', 'LOCALHOST', '::1', '[::1]']) expect(isLoopback(h)).toBe(true);
    for (const h of ['0.0.0.0', '::', '10.0.0.1', 'example.com', '128.0.0.1', 'localhost.example.com']) expect(isLoopback(h)).toBe(false);
  });

  it('strips the port from a Host header', () => {
    expect(hostnameOf('127.0.0.1:8080')).toBe('127.0.0.1');
    expect(hostnameOf('[::1]:8080')).toBe('[::1]');
    expect(hostnameOf('Example.COM')).toBe('example.com');
  });
});

describe('checkServeOptions', () => {
  it('refuses a non-loopback host without principals, naming --host', () => {
    expect(() => checkServeOptions({ host: '0.0.0.0', principalsConfigured: false })).toThrow(ConfigError);
    try {
      checkServeOptions({ host: '192.168.1.5', principalsConfigured: false });
    } catch (err) {
      expect((err as ConfigError).data?.path).toBe('--host');
    }
  });

  it('allows loopback without principals, and anything with principals', () => {
    expect(() => checkServeOptions({ host: '127.0.0.1', principalsConfigured: false })).not.toThrow();
    expect(() => checkServeOptions({ host: '::1', principalsConfigured: false })).not.toThrow();
    expect(() => checkServeOptions({ host: '0.0.0.0', principalsConfigured: true })).not.toThrow();
  });
});

describe('checkHostAndOrigin', () => {
  it('accepts loopback hosts with or without a port', () => {
    expect(checkHostAndOrigin('127.0.0.1:3000', undefined, loopbackOnly)).toBeUndefined();
    expect(checkHostAndOrigin('localhost', undefined, loopbackOnly)).toBeUndefined();
    expect(checkHostAndOrigin('[::1]:9', undefined, loopbackOnly)).toBeUndefined();
  });

  it('refuses other hosts and a missing Host', () => {
    expect(checkHostAndOrigin('evil.example.com', undefined, loopbackOnly)).toMatch(/allowedHosts/);
    expect(checkHostAndOrigin('127.0.0.1.evil.com', undefined, loopbackOnly)).toMatch(/allowedHosts/);
    expect(checkHostAndOrigin(undefined, undefined, loopbackOnly)).toMatch(/missing Host/);
  });

  it('accepts configured hosts by name or host:port, and * for any', () => {
    const policy = { allowedHosts: ['broker.internal', 'gw:8443'], allowedOrigins: [] };
    expect(checkHostAndOrigin('broker.internal:8080', undefined, policy)).toBeUndefined();
    expect(checkHostAndOrigin('gw:8443', undefined, policy)).toBeUndefined();
    expect(checkHostAndOrigin('gw:9999', undefined, policy)).toMatch(/allowedHosts/);
    expect(checkHostAndOrigin('anything', undefined, { allowedHosts: ['*'], allowedOrigins: [] })).toBeUndefined();
  });

  it('accepts no Origin, loopback origins and listed ones; refuses the rest', () => {
    expect(checkHostAndOrigin('localhost', 'http://localhost:5173', loopbackOnly)).toBeUndefined();
    expect(checkHostAndOrigin('localhost', 'http://127.0.0.1', loopbackOnly)).toBeUndefined();
    expect(checkHostAndOrigin('localhost', 'http://[::1]:8080', loopbackOnly)).toBeUndefined();
    expect(checkHostAndOrigin('localhost', 'http://evil.example.com', loopbackOnly)).toMatch(/allowedOrigins/);
    expect(checkHostAndOrigin('localhost', 'null', loopbackOnly)).toMatch(/allowedOrigins/);
    const listed = { ...loopbackOnly, allowedOrigins: ['https://app.example.com/'] };
    expect(checkHostAndOrigin('localhost', 'https://app.example.com', listed)).toBeUndefined();
    expect(checkHostAndOrigin('localhost', 'https://app.example.com.evil.com', listed)).toMatch(/allowedOrigins/);
  });
});

describe('checkHostAndOrigin: the refused value named', () => {
  // A configured secret is matched as written: the refusal lowercased the value before scrubbing it.
  const SECRET = 'GuardSecretXY12ab34CD';
  const scrubber = new Scrubber([SECRET]);
  const scrub = (text: string) => scrubber.text(text);

  it('a mixed-case secret in a refused Host or Origin is redacted, not shown lowercased (regression: scrubbed after lowercasing, so it passed)', () => {
    const host = checkHostAndOrigin(`${SECRET}.example:8080`, undefined, loopbackOnly, scrub);
    const origin = checkHostAndOrigin('localhost', `https://user@${SECRET}.Example/`, loopbackOnly, scrub);
    for (const why of [host, origin]) {
      expect(why).toContain('[REDACTED]');
      expect(why!.toLowerCase()).not.toContain(SECRET.toLowerCase().slice(0, 8));
    }
    expect(host).toBe('Host "[REDACTED].example:8080" is not in http.allowedHosts');
    expect(origin).toBe('Origin "https://user@[REDACTED].Example/" is not in http.allowedOrigins');
  });

  it('the value is still compared lowercased, without the port or trailing slashes', () => {
    expect(checkHostAndOrigin('LOCALHOST:9', 'HTTP://LocalHost:5173/', loopbackOnly, scrub)).toBeUndefined();
    expect(checkHostAndOrigin('localhost', 'https://App.Example.com//', { allowedHosts: ['localhost'], allowedOrigins: ['https://app.example.com'] }, scrub)).toBeUndefined();
  });
});
