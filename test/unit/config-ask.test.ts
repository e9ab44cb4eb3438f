/**
 * Asking for a VS Code `${input:id}` on a terminal (issue 18 §2): the prompt shows the
 * description, a password is not echoed, and giving up is a config error naming the variable.
 */
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { terminalAsker } from '../../src/config/ask.js';
import { ConfigError } from '../../src/shared/errors.js';

function terminal() {
  const input = new PassThrough();
  const output = new PassThrough();
  let shown = '';
  output.on('data', (chunk: Buffer) => (shown += chunk.toString('utf8')));
  return { input, output, shown: () => shown };
}

describe('terminalAsker', () => {
  it('issue 18 §2: asks with the description and reads the answer; a password is never echoed', async () => {
    const t = terminal();
    const ask = terminalAsker(t.input, t.output);
    const plain = ask({ type: 'promptString', id: 'region', description: 'AWS region' });
    t.input.write('eu-west-1\n');
    await expect(plain).resolves.toBe('eu-west-1');
    expect(t.shown()).toContain('AWS region (region): ');
    expect(t.shown()).toContain('eu-west-1');

    const secret = ask({ type: 'promptString', id: 'api-key', password: true });
    t.input.write('sk-typed-secret-123\n');
    await expect(secret).resolves.toBe('sk-typed-secret-123');
    expect(t.shown()).toContain('api-key (api-key): ');
    expect(t.shown()).not.toContain('sk-typed');
  });

  it('issue 18 §2: end of input before an answer is a config error naming the input and its variable', async () => {
    const t = terminal();
    const asked = terminalAsker(t.input, t.output)({ type: 'promptString', id: 'gh-token', password: true });
    t.input.end();
    const err = await asked.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).message).toContain('MCP_BROKER_INPUT_GH_TOKEN');
  });
});
