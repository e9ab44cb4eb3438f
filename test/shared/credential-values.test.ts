import { describe, expect, it } from 'vitest';
import { credentialValues } from '../../src/shared/scrub.js';

describe('credentialValues: which configured env/headers values are scrubbed by exact value', () => {
  it('keeps values that can be secrets, whatever their key', () => {
    expect(credentialValues({ CANARY: 'canary-1f2e3d4c5b6a', Authorization: 'Bearer abcdefgh', X_API_KEY: 'k3y!' })).toEqual([
      'canary-1f2e3d4c5b6a',
      'Bearer abcdefgh',
      'k3y!',
    ]);
  });

  it('leaves out numbers, booleans, paths and short non-credential values', () => {
    expect(
      credentialValues({
        MAX_TOKENS: '1000',
        RATIO: '-0.5',
        DEBUG: 'true',
        MEMORY_FILE_PATH: '/srv/data/memory.jsonl',
        REL: './data/x',
        HOMEISH: '~/x',
        WIN: 'C:\\Program Files\\x',
        LANG: 'en',
        MODE: 'fast',
      }),
    ).toEqual([]);
  });
});
