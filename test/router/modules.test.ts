/**
 * User function modules (servers.json `functions`): what loads, and what is a ConfigError naming
 * the module. The modules import `defineFunctionTool` from the package itself (`mcp-broker`,
 * resolved through package.json "exports" to dist/), so build first (`npx tsc -p .`).
 */
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { assertNoRosterCollision, loadFunctionModules } from '../../src/router/index.js';
import { MODULE_ERROR_MAX_CHARS } from '../../src/router/modules.js';
import { ConfigError } from '../../src/shared/errors.js';
import { Scrubber } from '../../src/shared/scrub.js';
import { ROOT } from '../e2e/helpers.js';

const fixture = (name: string) => join(ROOT, 'test/fixtures/functions', name);
const WEATHER = join(ROOT, 'tools/weather.js');

describe('loadFunctionModules', () => {
  it('loads the shipped example (default export array + named export, counted once)', async () => {
    const tools = await loadFunctionModules([WEATHER]);
    expect(tools.map((t) => t.definition.name)).toEqual(['get_weather']);
    expect(tools[0]!.definition.inputSchema).toMatchObject({ type: 'object', required: ['city'] });
  });

  it('loads named exports', async () => {
    const tools = await loadFunctionModules([fixture('echo-named.mjs')]);
    expect(tools.map((t) => t.definition.name).sort()).toEqual(['echo', 'shout']);
  });

  it.each([
    ['throws-on-load.mjs', /functions\[0\]: cannot load function module .*throws-on-load\.mjs: this module cannot be loaded/],
    ['exports-nothing.mjs', /functions\[0\]: function module .*exports-nothing\.mjs exports no function tool/],
    ['reserved-name.mjs', /functions\[0\]: function module .*reserved-name\.mjs: tool name "estate__sneaky" uses the reserved prefix "estate__"/],
    ['does-not-exist.mjs', /functions\[0\]: cannot load function module .*does-not-exist\.mjs/],
  ])('%s is a ConfigError naming the module', async (file, message) => {
    const err = await loadFunctionModules([fixture(file)]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toMatch(message);
  });

  describe('a load error holding a secret across the cut at MODULE_ERROR_MAX_CHARS', () => {
    /** An error whose secret starts 8 characters before the cut: a cut before the scrub kept those 8. */
    const failing = (secret: string) => async (): Promise<Record<string, unknown>> => {
      throw new Error(`${'x'.repeat(MODULE_ERROR_MAX_CHARS - 10)} ${secret} and the rest`);
    };
    const loadError = async (load: Promise<unknown>): Promise<string> => {
      const err = await load.catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ConfigError);
      return (err as Error).message;
    };

    it('an exact secret is scrubbed whole, then cut: none of its first characters are quoted', async () => {
      const secret = 'Zt9-exact-upstream-secret-value';
      const scrubber = new Scrubber([secret]);
      const message = await loadError(loadFunctionModules([fixture('throws-on-load.mjs')], failing(secret), (text) => scrubber.text(text)));
      expect(message).toContain('cannot load function module');
      expect(message).not.toContain(secret.slice(0, 4));
      expect(message).toContain('[REDACTE');
    });

    it('without a scrub given, the patterns still apply before the cut (a GitHub token by its shape)', async () => {
      const token = 'ghp_' + 'Q7'.repeat(20);
      const message = await loadError(loadFunctionModules([fixture('throws-on-load.mjs')], failing(token)));
      expect(message).not.toContain(token.slice(0, 6));
      expect(message).toContain('[REDACTE');
    });
  });

  it('a name defined by two modules is a ConfigError naming both; one module listed twice is not', async () => {
    const err = await loadFunctionModules([fixture('echo-named.mjs'), WEATHER, fixture('shout-again.mjs')]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toMatch(/functions\[2\]: function module .*shout-again\.mjs: tool "shout" is also defined by .*echo-named\.mjs/);
    const twice = await loadFunctionModules([fixture('echo-named.mjs'), fixture('echo-named.mjs')]);
    expect(twice.map((t) => t.definition.name).sort()).toEqual(['echo', 'shout']);
  });

  it('a local name that an upstream also advertises is a ConfigError', () => {
    expect(() => assertNoRosterCollision(['shout', 'echo'], ['everything__echo', 'echo'])).toThrow(/tool "echo" is defined by a function module and also advertised by an upstream/);
    expect(() => assertNoRosterCollision(['shout'], ['everything__echo'])).not.toThrow();
  });
});
