/**
 * The live config's file watch (src/config/watch.ts): saves in place, by rename, and by delete
 * then write are each seen and reloaded; and the file itself is watched, so writes to other files
 * in its folder (a records file or the store beside servers.json, written on every call; issue 19)
 * deliver nothing to the broker. Real files and real `fs.watch` events; the debounce runs on fake
 * timers once an event has arrived.
 */
import { mkdtempSync, readFileSync, renameSync, rmSync, unlinkSync, watch, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { LoadedConfig } from '../../src/config/load.js';
import { WATCH_DEBOUNCE_MS, watchConfig, type WatchFs } from '../../src/config/watch.js';
import { ConfigError } from '../../src/shared/errors.js';
import { createLogger } from '../../src/shared/logger.js';

const logger = createLogger({ level: 'silent' });

/** `fs.watch`, counting the events it delivers; `next()` resolves at the next one. */
function countingWatch() {
  const events: string[] = [];
  let wake: (() => void) | undefined;
  const fsWatch: WatchFs = (path, options, listener) =>
    watch(path, options, (event, name) => {
      events.push(`${event} ${name}`);
      listener(event, name as string | null);
      wake?.();
    });
  const next = () => new Promise<void>((resolve) => (wake = resolve));
  return { fsWatch, events, next };
}

describe('the live config file watch', () => {
  let dir: string;
  let file: string;
  const reloads: LoadedConfig[] = [];
  let close: (() => void) | undefined;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'mcp-broker-watch-'));
    file = join(dir, 'servers.json');
    writeFileSync(file, JSON.stringify({ mcpServers: {}, broker: { timeoutMs: 1000 } }));
    reloads.length = 0;
  });
  afterEach(() => {
    close?.();
    close = undefined;
    vi.useRealTimers();
    rmSync(dir, { recursive: true, force: true });
  });

  function start() {
    const counted = countingWatch();
    const gateway = {
      reload: async (next: LoadedConfig) => {
        reloads.push(next);
        return { added: [], removed: [], changed: [], policyChanged: false, principalsChanged: [], principalsAdded: [], needsRestart: [] };
      },
    };
    close = watchConfig(gateway, { file, watch: true, logger, watchFs: counted.fsWatch }).close;
    return counted;
  }

  /** Waits for the watch to deliver an event, then runs the debounce out. */
  async function settle(next: Promise<void>) {
    await next;
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    await vi.advanceTimersByTimeAsync(WATCH_DEBOUNCE_MS + 1);
    vi.useRealTimers();
    await vi.waitFor(() => expect(reloads.length).toBeGreaterThan(0));
  }

  const timeout = (config: LoadedConfig) => config.broker.timeoutMs;

  it('a save in place is reloaded', async () => {
    const w = start();
    const event = w.next();
    writeFileSync(file, JSON.stringify({ mcpServers: {}, broker: { timeoutMs: 2000 } }));
    await settle(event);
    expect(timeout(reloads.at(-1)!)).toBe(2000);
  });

  it('a save by rename (an editor writing a temp file over it) is reloaded, and so is the next save of the new file', async () => {
    const w = start();
    let event = w.next();
    writeFileSync(join(dir, 'servers.json.tmp'), JSON.stringify({ mcpServers: {}, broker: { timeoutMs: 3000 } }));
    renameSync(join(dir, 'servers.json.tmp'), file);
    await settle(event);
    expect(timeout(reloads.at(-1)!)).toBe(3000);
    reloads.length = 0;
    event = w.next();
    writeFileSync(file, JSON.stringify({ mcpServers: {}, broker: { timeoutMs: 4000 } }));
    await settle(event);
    expect(timeout(reloads.at(-1)!)).toBe(4000);
  });

  it('a delete, then a write later: reloaded once the file is back', async () => {
    const w = start();
    const gone = w.next();
    unlinkSync(file);
    await gone;
    const back = w.next();
    writeFileSync(file, JSON.stringify({ mcpServers: {}, broker: { timeoutMs: 5000 } }));
    await settle(back);
    expect(timeout(reloads.at(-1)!)).toBe(5000);
  });

  it('writes to other files in the folder wake nothing (issue 19: records beside servers.json)', async () => {
    const w = start();
    for (let i = 0; i < 50; i++) writeFileSync(join(dir, 'calls.ndjson'), `line ${i}\n`, { flag: 'a' });
    // An event for the config itself, after those: every event queued before it has been delivered by then.
    const event = w.next();
    writeFileSync(file, JSON.stringify({ mcpServers: {}, broker: { timeoutMs: 6000 } }));
    await settle(event);
    expect(w.events.every((e) => !e.includes('calls.ndjson'))).toBe(true);
    expect(w.events.length).toBeLessThan(5);
  });
});

describe('a reload refused for a file the config names (a REST upstream\'s OpenAPI file)', () => {
  let dir: string;
  let file: string;
  let spec: string;
  let close: (() => void) | undefined;
  /** Each reload the gateway was handed, and whether it applied it. */
  const reloads: { applied: boolean }[] = [];

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'mcp-broker-watch-openapi-'));
    file = join(dir, 'servers.json');
    spec = join(dir, 'pets.json');
    writeFileSync(file, JSON.stringify({ mcpServers: {} }));
    reloads.length = 0;
  });
  afterEach(() => {
    close?.();
    close = undefined;
    vi.useRealTimers();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Watches servers.json for a gateway that refuses a config while its OpenAPI file is not JSON, as preparing the REST upstream does. */
  function start() {
    const counted = countingWatch();
    const gateway = {
      reload: async (next: LoadedConfig) => {
        const server = next.mcpServers.pets as { openapi?: string } | undefined;
        let applied = true;
        try {
          if (server?.openapi) JSON.parse(readFileSync(server.openapi, 'utf8'));
        } catch {
          applied = false;
        }
        reloads.push({ applied });
        if (!applied) throw new ConfigError('mcpServers.pets.openapi', 'cannot load it');
        return { added: ['pets'], removed: [], changed: [], policyChanged: false, principalsChanged: [], principalsAdded: [], needsRestart: [] };
      },
    };
    close = watchConfig(gateway, { file, watch: true, logger, watchFs: counted.fsWatch }).close;
    return counted;
  }

  /** Waits for the watch to deliver an event, runs the debounce out, and waits for reload number `n`. */
  async function settle(next: Promise<void>, n: number) {
    await next;
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    await vi.advanceTimersByTimeAsync(WATCH_DEBOUNCE_MS + 1);
    vi.useRealTimers();
    await vi.waitFor(() => expect(reloads.length).toBe(n));
  }

  const withPets = JSON.stringify({ mcpServers: { pets: { type: 'rest', openapi: './pets.json', operations: ['getPet'] } } });

  it('fixing the OpenAPI file, servers.json untouched, reloads again and applies; once applied, the file wakes nothing', async () => {
    writeFileSync(spec, '{"openapi": "3.0');
    const w = start();
    let event = w.next();
    writeFileSync(file, withPets);
    await settle(event, 1);
    expect(reloads).toEqual([{ applied: false }]);
    event = w.next();
    writeFileSync(spec, '{"openapi": "3.0.3"}');
    await settle(event, 2);
    expect(reloads).toEqual([{ applied: false }, { applied: true }]);
    // Applied: the OpenAPI file is no longer watched (an event of servers.json, after that write, comes after any of its).
    await new Promise((resolve) => setImmediate(resolve));
    const seen = w.events.length;
    writeFileSync(spec, '{"openapi": "3.1.0"}');
    event = w.next();
    writeFileSync(file, JSON.stringify({ mcpServers: {} }));
    await settle(event, 3);
    expect(w.events.slice(seen).every((e) => e.endsWith('servers.json'))).toBe(true);
  });

  it('a fix saved while the gateway reads the broken file is still picked up (regression: its write came before the watch, and nothing compared it)', async () => {
    writeFileSync(spec, '{"openapi": "3.0');
    const fixWhileReading = () => writeFileSync(spec, '{"openapi": "3.0.3"}');
    const counted = countingWatch();
    const gateway = {
      reload: async (next: LoadedConfig) => {
        const server = next.mcpServers.pets as { openapi?: string } | undefined;
        const text = server?.openapi ? readFileSync(server.openapi, 'utf8') : '{}';
        // The operator saves the fix after the gateway read the broken bytes, before it refused them.
        if (reloads.length === 0) fixWhileReading();
        const applied = (() => {
          try {
            JSON.parse(text);
            return true;
          } catch {
            return false;
          }
        })();
        reloads.push({ applied });
        if (!applied) throw new ConfigError('mcpServers.pets.openapi', 'cannot load it');
        return { added: ['pets'], removed: [], changed: [], policyChanged: false, principalsChanged: [], principalsAdded: [], needsRestart: [] };
      },
    };
    close = watchConfig(gateway, { file, watch: true, logger, watchFs: counted.fsWatch }).close;
    const event = counted.next();
    writeFileSync(file, withPets);
    await settle(event, 1);
    expect(reloads).toEqual([{ applied: false }]);
    await vi.waitFor(() => expect(reloads).toEqual([{ applied: false }, { applied: true }]), { timeout: 3000 });
  });

  it('a reload refused after close() opens no watch (regression: the OpenAPI file stayed watched, and could reload, after shutdown)', async () => {
    writeFileSync(spec, '{"openapi": "3.0');
    const opened: string[] = [];
    let open = 0;
    const fsWatch: WatchFs = (path, options, listener) => {
      const w = watch(path, options, listener);
      opened.push(path);
      open++;
      const closeWatch = w.close.bind(w);
      w.close = () => {
        open--;
        closeWatch();
      };
      return w;
    };
    let refuse!: () => void;
    const gateway = {
      reload: () =>
        new Promise<never>((_, reject) => {
          refuse = () => reject(new ConfigError('mcpServers.pets.openapi', 'cannot load it'));
        }),
    };
    writeFileSync(file, withPets);
    const watching = watchConfig(gateway, { file, watch: true, logger, watchFs: fsWatch });
    const reloading = watching.reload('SIGHUP');
    await vi.waitFor(() => expect(refuse).toBeDefined());
    watching.close();
    refuse();
    await reloading;
    expect(opened).toEqual([file]);
    expect(open).toBe(0);
  });

  it('an OpenAPI file missing at the refusal is picked up when it is written (by rename, as an editor saves)', async () => {
    const w = start();
    let event = w.next();
    writeFileSync(file, withPets);
    await settle(event, 1);
    expect(reloads).toEqual([{ applied: false }]);
    event = w.next();
    writeFileSync(join(dir, 'pets.json.tmp'), '{"openapi": "3.0.3"}');
    renameSync(join(dir, 'pets.json.tmp'), spec);
    await settle(event, 2);
    expect(reloads.at(-1)).toEqual({ applied: true });
  });
});

describe('a reload of a config whose inputs were asked at start', () => {
  it('fills them with the answers given at start (every live edit was refused: "input has no value")', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mcp-broker-watch-inputs-'));
    try {
      const file = join(dir, 'servers.json');
      writeFileSync(file, JSON.stringify({ servers: { a: { command: 'node', env: { K: '${input:k}' } } }, inputs: [{ type: 'promptString', id: 'k', password: true }] }));
      expect(process.env.MCP_BROKER_INPUT_K).toBeUndefined();
      for (const answers of [{ k: 'asked-at-start' }, undefined]) {
        const reloads: LoadedConfig[] = [];
        const gateway = {
          reload: async (next: LoadedConfig) => {
            reloads.push(next);
            return { added: [], removed: [], changed: [], policyChanged: false, principalsChanged: [], principalsAdded: [], needsRestart: [] };
          },
        };
        const watching = watchConfig(gateway, { file, watch: false, logger, answers });
        await watching.reload('SIGHUP');
        watching.close();
        if (answers) expect((reloads[0]?.mcpServers.a as { env: Record<string, string> } | undefined)?.env.K).toBe('asked-at-start');
        else expect(reloads).toEqual([]);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
