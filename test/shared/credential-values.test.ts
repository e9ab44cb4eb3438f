import { describe, expect, it } from 'vitest';
import { credentialValues, Scrubber } from '../../src/shared/scrub.js';

describe('credentialValues: which configured env/headers literals are scrubbed by exact value', () => {
  it('keeps the values of credential-named keys, short ones too', () => {
    expect(credentialValues({ API_KEY: 'canary-1f2e3d4c5b6a', Authorization: 'Bearer abcdefgh', 'X-Api-Key': 'k3y!', DB_PASSWORD: '1234' })).toEqual([
      'canary-1f2e3d4c5b6a',
      'Bearer abcdefgh',
      'abcdefgh',
      'k3y!',
      '1234',
    ]);
  });

  it('ordinary environment values redacted everywhere: NODE_ENV=production and other settings are not secrets (issue 17 §9)', () => {
    expect(
      credentialValues({
        NODE_ENV: 'production',
        CANARY: 'canary-1f2e3d4c5b6a',
        MAX_TOKENS: '1000',
        DEBUG: 'true',
        MEMORY_FILE_PATH: '/srv/data/memory.jsonl',
        LANG: 'en',
        MODE: 'fast',
        API_TOKEN: 'false',
      }),
    ).toEqual([]);
    // So a result of any server that says "production" stays readable.
    const scrubber = new Scrubber(credentialValues({ NODE_ENV: 'production', GITHUB_TOKEN: 'gh-literal-value-123' }));
    expect(scrubber.text('deployed to production with gh-literal-value-123')).toBe('deployed to production with [REDACTED]');
  });
});

describe('Bearer / Basic / Token shapes', () => {
  const scrubber = new Scrubber();
  it('prose after Basic or Token survives; real credentials do not', () => {
    expect(scrubber.text('Basic information about the server')).toBe('Basic information about the server');
    expect(scrubber.text('Token limits apply to requests')).toBe('Token limits apply to requests');
    expect(scrubber.text('Authorization: Basic dXNlcjpwYXNz')).not.toContain('dXNlcjpwYXNz');
    expect(scrubber.text('Token 9f8e7d6c5b4a3f2e')).not.toContain('9f8e7d6c5b4a3f2e');
    expect(scrubber.text('Bearer tttttttttttttttttttt')).not.toContain('tttttttttttttttttttt');
  });
});
