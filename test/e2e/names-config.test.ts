/**
 * Names through the CLI (F13, F14), start-time collisions, bad configs (exit 2 with the JSON
 * path, never a secret) and the fail-closed records file.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { describe, expect, it } from 'vitest';
import { CLI, fixture, nodeServer, spawnRawBroker, startBroker, writeConfig } from './helpers.js';
import { advertisedNames } from '../../src/upstream/naming.js';

const NAME = /^[A-Za-z0-9_-]{1,64}$/;
const text = (r: { content?: unknown }) => ((r.content as Array<{ text?: string }>)[0]?.text ?? '') as string;

/** Runs the CLI on a config object (written verbatim) with stdin closed; resolves with exit code and stderr. */
function runCli(config: unknown, env: Record<string, string> = {}): Promise<{ code: number | null; stderr: string; stdout: string }> {
  const { dir, configPath } = writeConfig({});
  writeFileSync(configPath, typeof config === 'string' ? config : JSON.stringify(config));
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, '--config', configPath], { env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
    let stderr = '';
    let stdout = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c));
    child.stdout.on('data', (c: Buffer) => (stdout += c));
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    // 'close', not 'exit': stdout and stderr are read to their ends.
    child.on('close', (code) => {
      clearTimeout(timer);
      rmSync(dir, { recursive: true, force: true });
      resolve({ code, stderr, stdout });
    });
  });
}

describe('names', () => {
  it('F13: a tool named b__c under server a and a tool c under server a_b each reach their own upstream', async () => {
    const broker = await startBroker({
      servers: {
        a: nodeServer(fixture('names.mjs'), { env: { FIXTURE_TOOLS: '["b__c"]', FIXTURE_NAME: 'a' } }),
        a_b: nodeServer(fixture('names.mjs'), { env: { FIXTURE_TOOLS: '["c"]', FIXTURE_NAME: 'a_b' } }),
      },
    });
    try {
      // Only the upstreams' tools (the broker's own tools are listed too).
      const names = (await broker.client.listTools()).tools.map((t) => t.name).filter((n) => n.startsWith('a')).sort();
      expect(names).toEqual(['a__b__c', 'a_b__c']);
      expect(JSON.parse(text(await broker.client.callTool({ name: 'a__b__c', arguments: {} })))).toEqual({ server: 'a', tool: 'b__c' });
      expect(JSON.parse(text(await broker.client.callTool({ name: 'a_b__c', arguments: {} })))).toEqual({ server: 'a_b', tool: 'c' });
    } finally {
      await broker.close();
    }
  });

  it('a records path or data folder that cannot be made (a file on the way) is a config error (exit 2) naming it, not a crash (exit 1)', async () => {
    const file = join(tmpdir(), `mcp-broker-a-file-${process.pid}`);
    writeFileSync(file, 'not a folder');
    try {
      const records = await runCli({ mcpServers: {}, broker: { records: { path: join(file, 'calls.ndjson') } } });
      expect(records.code).toBe(2);
      expect(records.stderr).toContain('broker.records.path: cannot be used');
      // A folder that exists but takes no file (the lock file cannot be made there).
      const lock = await runCli({ mcpServers: {}, broker: { records: { path: '/proc/calls.ndjson' } } });
      expect(lock.code).toBe(2);
      expect(lock.stderr).toContain('broker.records.path: cannot be used');
      const data = await runCli({ mcpServers: {}, broker: { dataDir: join(file, 'data') } });
      expect(data.code).toBe(2);
      expect(data.stderr).toContain('broker.dataDir: cannot be used');
    } finally {
      rmSync(file, { force: true });
    }
  });

  it.skipIf(process.platform !== 'linux')(
    'a records path or data folder under /proc (a folder that exists but in which no folder can be made) exits 2 at once, not spinning in mkdir',
    async () => {
      // Node's recursive mkdir loops for ever where mkdir answers ENOENT under a parent that exists.
      const started = Date.now();
      const records = await runCli({ mcpServers: {}, broker: { records: { path: '/proc/self/mcp-broker-none/calls.ndjson' } } });
      expect(records.code).toBe(2);
      expect(records.stderr).toContain('broker.records.path: cannot be used');
      expect(records.stderr).toContain('/proc/self/mcp-broker-none');
      const data = await runCli({ mcpServers: {}, broker: { dataDir: '/proc/self/mcp-broker-none/data' } });
      expect(data.code).toBe(2);
      expect(data.stderr).toContain('broker.dataDir: cannot be used');
      // runCli kills a CLI still running after 15 s; a clean refusal takes well under that.
      expect(Date.now() - started).toBeLessThan(20_000);
    },
    40_000,
  );

  it('F13: a server key containing the "__" delimiter is a config error (exit 2) naming it', async () => {
    const { code, stderr } = await runCli({ mcpServers: { a__b: { command: 'node', args: [fixture('names.mjs')] } } });
    expect(code).toBe(2);
    expect(stderr).toContain('mcpServers.a__b');
    expect(stderr).toContain('__');
  });

  it('F14: dots, slashes, spaces, non-ASCII and over-long names are sanitised, unique, and route to the original tool', async () => {
    const broker = await startBroker({ servers: { 'servicenow-catalog': nodeServer(fixture('names.mjs')) } });
    let firstNames: string[] = [];
    try {
      const tools = (await broker.client.listTools()).tools;
      const names = tools.map((t) => t.name).filter((n) => n.startsWith('servicenow-catalog'));
      expect(names.length).toBe(7);
      firstNames = names;
      expect(new Set(names).size).toBe(names.length);
      for (const n of names) expect(n).toMatch(NAME);
      expect(names).toEqual(
        expect.arrayContaining([
          'servicenow-catalog__dot_name',
          'servicenow-catalog__slash_name',
          'servicenow-catalog__space_name',
          'servicenow-catalog___',
          'servicenow-catalog__b__c',
        ]),
      );
      const long = names.filter((n) => n.length === 64);
      expect(long.length).toBe(2);
      expect(long[0]).not.toBe(long[1]);
      const reached = new Set<string>();
      for (const n of names) reached.add(JSON.parse(text(await broker.client.callTool({ name: n, arguments: {} }))).tool);
      expect([...reached].sort()).toEqual(
        [
          'dot.name', 'slash/name', 'space name', '汉', 'b__c',
          'post_api_sn_sc_servicecatalog_items_by_sys_id_versioning_checkout',
          'post_api_sn_sc_servicecatalog_items_by_sys_id_versioning_checkout_v2',
        ].sort(),
      );
    } finally {
      await broker.close();
    }
    // Stable across runs: a second process advertises the same names.
    const again = await startBroker({ servers: { 'servicenow-catalog': nodeServer(fixture('names.mjs')) } });
    try {
      const names2 = (await again.client.listTools()).tools.map((t) => t.name).filter((n) => n.startsWith('servicenow-catalog'));
      expect(names2.sort()).toEqual(firstNames.sort());
    } finally {
      await again.close();
    }
  });

  it('F14: tools of one upstream that sanitise or shorten to one name are each advertised under their own, routed to the original, and nothing exits (it exited 2 after initialize, its hint "set a different prefix" no cure)', async () => {
    const long = 'post_api_sn_sc_servicecatalog_items_by_sys_id_versioning_checkout';
    const originals = ['a.b', 'a/b', `${long}.v2`, `${long}/v2`];
    const b = spawnRawBroker({ servers: { names: nodeServer(fixture('names.mjs'), { env: { FIXTURE_TOOLS: JSON.stringify(originals) } }) } });
    try {
      await b.initialize();
      const listed = await b.request(1, 'tools/list');
      const names = ((listed.result as { tools: { name: string }[] }).tools ?? []).map((t) => t.name).filter((n) => n.startsWith('names__'));
      expect(names).toHaveLength(4);
      expect(new Set(names).size).toBe(4);
      for (const n of names) expect(n).toMatch(NAME);
      // Each of a group that would share a name has its own hash suffix; none keeps the shared name.
      expect(names.filter((n) => /^names__a_b_[0-9a-f]{8}$/.test(n))).toHaveLength(2);
      expect(names).not.toContain('names__a_b');
      const reached: string[] = [];
      for (const [i, name] of names.entries()) {
        const answer = await b.request(10 + i, 'tools/call', { name, arguments: {} });
        reached.push(JSON.parse((answer.result as { content: { text: string }[] }).content[0]!.text).tool);
      }
      expect(reached.sort()).toEqual([...originals].sort());
      expect(b.stderr()).not.toContain('share one advertised name');
      expect(b.child.exitCode).toBe(null);
    } finally {
      await b.close();
    }
  });

  it('F14: a rule naming the shared name still covers the tools it was split into (a deny on names__a_b was escaped once a_b was renamed beside a.b)', async () => {
    const b = spawnRawBroker({
      servers: { names: nodeServer(fixture('names.mjs'), { env: { FIXTURE_TOOLS: JSON.stringify(['a_b', 'a.b', 'c_d']) } }) },
      extra: { policy: { default: 'allow', rules: [{ tools: ['names__a_b'], action: 'deny' }] } },
    });
    try {
      await b.initialize();
      const listed = await b.request(1, 'tools/list');
      const names = ((listed.result as { tools: { name: string }[] }).tools ?? []).map((t) => t.name).filter((n) => n.startsWith('names__'));
      // Both renamed members are judged under names__a_b too: hidden; c_d is not in the group.
      expect(names).toEqual(['names__c_d']);
      for (const [i, name] of advertisedNames('names', ['a_b', 'a.b']).entries()) {
        const answer = await b.request(10 + i, 'tools/call', { name, arguments: {} });
        expect(answer.result).toMatchObject({ isError: true, _meta: { 'mcp-broker/outcome': 'denied' } });
      }
    } finally {
      await b.close();
    }
  });

  it('F14: tools of two upstreams that sanitise to one name are a config error at start (exit 2) naming the second', async () => {
    const b = spawnRawBroker({
      servers: {
        names: nodeServer(fixture('names.mjs'), { env: { FIXTURE_TOOLS: '["x.y"]' }, prefix: false }),
        other: nodeServer(fixture('names.mjs'), { env: { FIXTURE_TOOLS: '["x_y"]' }, prefix: false }),
      },
    });
    try {
      b.send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } });
      const code = await Promise.race([b.exited, new Promise((r) => setTimeout(() => r('still running'), 15_000))]);
      expect(code).toBe(2);
      expect(b.stderr()).toContain('mcpServers.other');
      expect(b.stderr()).toContain('"x_y"');
    } finally {
      await b.close();
    }
  });

  it('F14 over HTTP: the same collision exits 2 before the face listens', async () => {
    // The HTTP face starts its upstreams before its own modules load; the start's failure still ends the process.
    const { dir, configPath } = writeConfig({
      names: nodeServer(fixture('names.mjs'), { env: { FIXTURE_TOOLS: '["x.y"]' }, prefix: false }),
      other: nodeServer(fixture('names.mjs'), { env: { FIXTURE_TOOLS: '["x_y"]' }, prefix: false }),
    });
    try {
      const child = spawn(process.execPath, [CLI, '--config', configPath, '--transport', 'http', '--port', '0'], { stdio: ['ignore', 'ignore', 'pipe'] });
      let err = '';
      child.stderr!.on('data', (c: Buffer) => (err += c.toString()));
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      // 'close', not 'exit': stderr is read to its end.
      const code = await new Promise<number | null>((resolve) => child.once('close', (c) => resolve(c)));
      clearTimeout(timer);
      expect(code).toBe(2);
      expect(err).toContain('mcpServers.other');
      expect(err).toContain('"x_y"');
      expect(err).not.toContain('serving http');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('bad config', () => {
  it('exits 2 naming the JSON path and the bad value', async () => {
    const { code, stderr, stdout } = await runCli({ mcpServers: {}, broker: { timeoutMs: -5 } });
    expect(code).toBe(2);
    expect(stderr).toContain('broker.timeoutMs');
    expect(stderr).toContain('-5');
    expect(stdout).toBe('');
  });

  it('exits 2 for invalid JSON, an unknown field, a reserved name and a missing ${env:} variable', async () => {
    const bad = await runCli('{ "mcpServers": ');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('not valid JSON');

    const unknown = await runCli({ mcpServers: { u: { command: 'node', comand: 'x' } } });
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('mcpServers.u');
    expect(unknown.stderr).toContain('comand');

    const reserved = await runCli({ mcpServers: { broker: { command: 'node' } } });
    expect(reserved.code).toBe(2);
    expect(reserved.stderr).toContain('mcpServers.broker');
    expect(reserved.stderr).toContain('reserved');

    const missing = await runCli({ mcpServers: { u: { command: 'node', env: { TOKEN: '${env:MCP_BROKER_TEST_UNSET_VAR}' } } } });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('mcpServers.u.env.TOKEN');
    expect(missing.stderr).toContain('MCP_BROKER_TEST_UNSET_VAR');
  });

  it('exits 2 for a "__proto__" key whatever its value, naming where (a primitive one was dropped and the broker served)', async () => {
    const echo = JSON.stringify({ command: 'node', args: [fixture('echo.mjs')] });
    for (const [text, where] of [
      [`{"mcpServers":{"__proto__":1,"echo":${echo}}}`, 'mcpServers: has a key "__proto__"'],
      [`{"mcpServers":{"echo":${echo.slice(0, -1)},"env":{"__proto__":"x"}}}}`, 'mcpServers.echo.env: has a key "__proto__"'],
    ]) {
      const { code, stderr, stdout } = await runCli(text!);
      expect(code, text).toBe(2);
      expect(stderr).toContain(where);
      expect(stdout).toBe('');
    }
  });

  it('never prints a secret that came from ${env:}', async () => {
    const secret = `tok-${Math.random().toString(36).slice(2)}-SECRET`;
    const env = { MCP_BROKER_TEST_SECRET: secret };
    const inUrl = await runCli({ mcpServers: { remote: { type: 'http', url: 'not a url ${env:MCP_BROKER_TEST_SECRET}' } } }, env);
    expect(inUrl.code).toBe(2);
    expect(inUrl.stderr).toContain('mcpServers.remote.url');
    expect(inUrl.stderr).not.toContain(secret);

    const inPrefix = await runCli({ mcpServers: { remote: { command: 'node', prefix: 'bad prefix ${env:MCP_BROKER_TEST_SECRET}' } } }, env);
    expect(inPrefix.code).toBe(2);
    expect(inPrefix.stderr).toContain('mcpServers.remote.prefix');
    expect(inPrefix.stderr).not.toContain(secret);

    const inHeader = await runCli({ mcpServers: { remote: { type: 'http', url: 'http://127.0.0.1:1/mcp', headers: { Authorization: 5 } } }, broker: { timeoutMs: '${env:MCP_BROKER_TEST_SECRET}' } }, env);
    expect(inHeader.code).toBe(2);
    expect(inHeader.stderr).not.toContain(secret);
  });
});

describe('bad config: every problem at once (issue 18 §2)', () => {
  it('issue 18 §2: lists every problem on its own line, exit 2, never "(and N more)"', async () => {
    const { code, stderr, stdout } = await runCli({
      mcpServers: { a__b: { command: 'node' }, u: { command: 7 }, h: { type: 'http', url: 'nope' } },
      broker: { timeoutMs: 0 },
    });
    expect(code).toBe(2);
    expect(stdout).toBe('');
    const lines = stderr.split('\n').filter((l) => l.startsWith('mcp-broker: bad config: '));
    expect(lines.map((l) => l.slice('mcp-broker: bad config: '.length).split(':')[0]).sort()).toEqual(
      ['broker.timeoutMs', 'mcpServers.a__b', 'mcpServers.h.url', 'mcpServers.u.command'].sort(),
    );
    expect(stderr).not.toMatch(/and \d+ more/);
  });

  it('issue 18 §2: an unknown placeholder exits 2 naming its path; the child is never started with it', async () => {
    const { code, stderr } = await runCli({ mcpServers: { u: { command: 'node', args: [fixture('echo.mjs'), '${config:root}'] } } });
    expect(code).toBe(2);
    expect(stderr).toContain('mcpServers.u.args[1]: unknown placeholder "${config:root}"');
  });

  it('issue 18 §2: an ${input:id} with no terminal and no MCP_BROKER_INPUT_<ID> exits 2 naming the variable', async () => {
    const { code, stderr } = await runCli({
      inputs: [{ type: 'promptString', id: 'gh-token', password: true }],
      servers: { gh: { command: 'node', args: [fixture('echo.mjs')], env: { GITHUB_TOKEN: '${input:gh-token}' } } },
    });
    expect(code).toBe(2);
    expect(stderr).toContain('servers.gh.env.GITHUB_TOKEN: input "gh-token" has no value: set MCP_BROKER_INPUT_GH_TOKEN');
  });

  it('issue 18 §2: invalid JSON names line:column', async () => {
    const { code, stderr } = await runCli('{\n  "mcpServers": {\n    "u": { "command" "node" }\n  }\n}\n');
    expect(code).toBe(2);
    expect(stderr).toMatch(/servers\.json:3:22: colon expected/);
  });
});

describe('records file', () => {
  it('a call whose record cannot be written is answered guard_error with the result withheld', async () => {
    const broker = await startBroker({
      servers: { u1: nodeServer(fixture('echo.mjs')) },
      extra: { broker: { records: { path: '${configDir}/records-is-a-folder' } } },
    });
    try {
      mkdirSync(join(broker.dir, 'records-is-a-folder'), { recursive: true });
      const r = await broker.client.callTool({ name: 'u1__echo', arguments: { text: 'must not leak' } });
      expect(r.isError).toBe(true);
      expect((r._meta as Record<string, unknown>)['mcp-broker/outcome']).toBe('guard_error');
      expect(JSON.stringify(r)).not.toContain('must not leak');
      expect(text(r)).toContain('record');
    } finally {
      await broker.close();
    }
  });
});
