import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfigFile, loadConfigFileAsking, parseConfig } from '../../src/config/load.js';
import {
  DEFAULT_MAX_SESSIONS,
  DEFAULT_MAX_SESSIONS_PER_PRINCIPAL,
  DEFAULT_MAX_STREAMS,
  DEFAULT_MAX_STREAMS_PER_PRINCIPAL,
  DEFAULT_TIMEOUT_MS,
  serverKind,
} from '../../src/config/schema.js';
import { ConfigError, type ConfigProblem } from '../../src/shared/errors.js';
import { childEnv, DEFAULT_INHERITED_ENV } from '../../src/upstream/spawn-env.js';

const BASE = '/srv/conf';

function configError(raw: unknown, env: NodeJS.ProcessEnv = {}): ConfigError {
  try {
    parseConfig(raw, { baseDir: BASE, env });
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

describe('config schema defaults', () => {
  it('issue 12: the http caps and server timeouts have their defaults in the schema', () => {
    const c = parseConfig({}, { baseDir: BASE, env: {} });
    expect(c.http).toMatchObject({
      maxSessions: DEFAULT_MAX_SESSIONS,
      maxSessionsPerPrincipal: DEFAULT_MAX_SESSIONS_PER_PRINCIPAL,
      maxStreams: DEFAULT_MAX_STREAMS,
      maxStreamsPerPrincipal: DEFAULT_MAX_STREAMS_PER_PRINCIPAL,
      headersTimeoutMs: 20_000,
      requestTimeoutMs: 60_000,
      keepAliveTimeoutMs: 5_000,
    });
    expect([DEFAULT_MAX_SESSIONS, DEFAULT_MAX_SESSIONS_PER_PRINCIPAL, DEFAULT_MAX_STREAMS, DEFAULT_MAX_STREAMS_PER_PRINCIPAL]).toEqual([1000, 100, 1000, 100]);
  });

  it('issue 15: the task timings are broker settings with their defaults in the schema (heartbeat 5 s, staleness 15 s, poll 1 s)', () => {
    const c = parseConfig({}, { baseDir: BASE, env: {} });
    expect(c.broker).toMatchObject({ taskHeartbeatMs: 5_000, taskStaleMs: 15_000, taskPollMs: 1_000 });
    expect(parseConfig({ broker: { taskHeartbeatMs: 2_000, taskStaleMs: 6_000, taskPollMs: 250 } }, { baseDir: BASE, env: {} }).broker).toMatchObject({
      taskHeartbeatMs: 2_000,
      taskStaleMs: 6_000,
      taskPollMs: 250,
    });
  });

  it('issue 15: a staleness at or below the heartbeat is a config error naming both', () => {
    const err = configError({ broker: { taskHeartbeatMs: 5_000, taskStaleMs: 5_000 } });
    expect(err.data?.path).toBe('broker.taskStaleMs');
    expect(err.message).toContain('broker.taskHeartbeatMs');
    expect(configError({ broker: { taskPollMs: 0 } }).data?.path).toBe('broker.taskPollMs');
  });

  it('issue 12: a headers timeout longer than the request timeout is a config error naming both', () => {
    const err = configError({ http: { headersTimeoutMs: 5000, requestTimeoutMs: 1000 } });
    expect(err.data?.path).toBe('http.headersTimeoutMs');
    expect(err.message).toContain('http.requestTimeoutMs');
    expect(configError({ http: { maxSessionsPerPrincipal: 0 } }).data?.path).toBe('http.maxSessionsPerPrincipal');
  });

  it('an empty object gets every default from the schema, paths resolved against the config folder', () => {
    const c = parseConfig({}, { baseDir: BASE, env: {} });
    expect(c.mcpServers).toEqual({});
    expect(c.broker.timeoutMs).toBe(DEFAULT_TIMEOUT_MS);
    expect(c.broker.records.path).toBe('/srv/conf/data/calls.ndjson');
    expect(c.broker.records.maxBytes).toBe(64 * 1024 * 1024);
    expect(c.broker.records.maxFiles).toBe(5);
    expect(c.broker.env.inherit).toEqual([...DEFAULT_INHERITED_ENV]);
    expect(c.broker.restart).toEqual({ initialDelayMs: 500, maxDelayMs: 30_000 });
    expect(c.policy.default).toBe('allow');
    expect(c.estate.root).toBe('/srv/conf/workspace');
    expect(c.secrets).toEqual([]);
  });

  it('a stdio server gets args, env, inheritEnv, tools and cwd defaults; absolute paths stay', () => {
    const c = parseConfig(
      { mcpServers: { u: { command: 'node' }, v: { command: 'x', cwd: 'sub' } }, broker: { records: { path: '/var/log/calls.ndjson' } } },
      { baseDir: BASE, env: {} },
    );
    const u = c.mcpServers.u as { args: string[]; env: object; inheritEnv: string[]; cwd: string; tools: object; disabled: boolean; connectTimeoutMs: number };
    expect(u).toMatchObject({ args: [], env: {}, inheritEnv: [], cwd: BASE, tools: {}, disabled: false, connectTimeoutMs: 30_000 });
    expect((c.mcpServers.v as { cwd: string }).cwd).toBe('/srv/conf/sub');
    expect(c.broker.records.path).toBe('/var/log/calls.ndjson');
  });

  it('accepts the Claude Desktop mcpServers shape with http and sse entries', () => {
    const c = parseConfig(
      {
        mcpServers: {
          everything: { command: 'node', args: ['x.js', 'stdio'], env: {} },
          remote: { type: 'http', url: 'http://127.0.0.1:3001/mcp', headers: {} },
          legacy: { type: 'sse', url: 'http://127.0.0.1:3002/sse' },
        },
      },
      { baseDir: BASE, env: {} },
    );
    expect(Object.keys(c.mcpServers)).toEqual(['everything', 'remote', 'legacy']);
    expect((c.mcpServers.legacy as { headers: object }).headers).toEqual({});
  });
});

describe('${env:} and ${configDir} interpolation', () => {
  it('replaces ${env:NAME} in any string and keeps the value as a secret to scrub', () => {
    const c = parseConfig(
      { mcpServers: { u: { command: 'node', args: ['--token=${env:TOK}'], env: { KEY: '${env:TOK}', PLAIN: 'p' } } } },
      { baseDir: BASE, env: { TOK: 'abcdef123' } },
    );
    const u = c.mcpServers.u as { args: string[]; env: Record<string, string> };
    expect(u.args).toEqual(['--token=abcdef123']);
    expect(u.env.KEY).toBe('abcdef123');
    expect(c.secrets).toContain('abcdef123');
  });

  it('replaces ${configDir} with the config folder', () => {
    const c = parseConfig({ mcpServers: { u: { command: 'node', env: { F: '${configDir}/data/m.jsonl' } } } }, { baseDir: BASE, env: {} });
    expect((c.mcpServers.u as { env: Record<string, string> }).env.F).toBe('/srv/conf/data/m.jsonl');
  });

  it('a missing variable is an error at its JSON path naming the variable', () => {
    const err = configError({ mcpServers: { u: { command: 'node', env: { TOKEN: '${env:NOPE_NOT_SET}' } } } });
    expect(err.data?.path).toBe('mcpServers.u.env.TOKEN');
    expect(err.message).toContain('NOPE_NOT_SET');
  });

  it('never puts an ${env:} value into an error message, whatever field it lands in', () => {
    const env = { SECRET_VALUE: 'sk-live-0123456789' };
    for (const raw of [
      { mcpServers: { r: { type: 'http', url: 'bad url ${env:SECRET_VALUE}' } } },
      { mcpServers: { r: { command: 'node', prefix: 'not ok ${env:SECRET_VALUE}' } } },
      { broker: { timeoutMs: '${env:SECRET_VALUE}' } },
      { mcpServers: { r: { type: '${env:SECRET_VALUE}' } } },
      { mcpServers: { r: { command: 'node', env: { A: 5 } } }, broker: { records: { path: '${env:SECRET_VALUE}' }, maxMessageBytes: 1 } },
    ]) {
      const err = configError(raw, env);
      expect(err.message).not.toContain('sk-live-0123456789');
      expect(err.data?.path).toBeTruthy();
    }
    // A value with a quote or a backslash was shown escaped (`(got "pa\\ss")`), which the redaction did not find.
    const quoted = { SECRET_URL: 'not a url "hunter2secret"', SECRET_T: 'pa\\ss"word', TOK: 'super"secrettoken' };
    for (const raw of [
      { mcpServers: { h: { type: 'http', url: '${env:SECRET_URL}' } } },
      { mcpServers: { s: { command: 'node', timeoutMs: '${env:SECRET_T}' } } },
      { mcpServers: { x: { type: '${env:TOK}' } } },
    ]) {
      const message = configError(raw, quoted).message;
      for (const fragment of ['hunter2secret', 'ss\\"word', 'pa\\\\ss', 'secrettoken']) expect(message, JSON.stringify(raw)).not.toContain(fragment);
    }
  });

  it('a placeholder naming a member every object has (toString, __proto__) is an unset variable: its default, or an error naming it (it read the member: "undefined")', () => {
    const parsed = parseConfig({ mcpServers: { a: { command: 'node', args: ['${toString:-fallback}', '${env:constructor:-also}'] } } }, { baseDir: BASE, env: {} });
    expect((parsed.mcpServers.a as { args: string[] }).args).toEqual(['fallback', 'also']);
    for (const name of ['hasOwnProperty', '__proto__', 'valueOf']) {
      expect(configError({ mcpServers: { a: { command: 'node', args: [`\${env:${name}}`] } } }).message).toContain(`environment variable ${name} is not set`);
    }
  });

  it('inheritEnv naming a member every object has inherits nothing (a stack trace, exit 1, at serve)', () => {
    expect(childEnv(['toString', 'constructor', '__proto__', 'PATH'], {}, { PATH: '/bin' })).toEqual({ PATH: '/bin' });
  });
});

describe('config errors name the JSON path', () => {
  it('wrong types, bad values and unknown fields', () => {
    expect(configError({ broker: { timeoutMs: 0 } }).message).toMatch(/^broker\.timeoutMs: .*\(got 0\)/);
    expect(configError({ mcpServers: { u: { command: 7 } } }).data?.path).toBe('mcpServers.u.command');
    expect(configError({ mcpServers: { u: { command: 'node', args: ['ok', 3] } } }).data?.path).toBe('mcpServers.u.args[1]');
    const unknown = configError({ mcpServers: { u: { command: 'node', cmd: 'x' } } });
    expect(unknown.data?.path).toBe('mcpServers.u');
    expect(unknown.message).toContain('cmd');
    expect(configError({ nope: 1 }).message).toContain('unknown field(s): nope');
  });

  it('resourcePriority: an integer, default 0, at its path when it is not', () => {
    expect((parseConfig({ mcpServers: { u: { command: 'node' } } }, { baseDir: BASE, env: {} }).mcpServers.u as { resourcePriority: number }).resourcePriority).toBe(0);
    expect((parseConfig({ mcpServers: { u: { type: 'http', url: 'http://127.0.0.1:9/mcp', resourcePriority: -2 } } }, { baseDir: BASE, env: {} }).mcpServers.u as { resourcePriority: number }).resourcePriority).toBe(-2);
    expect(configError({ mcpServers: { u: { command: 'node', resourcePriority: 1.5 } } }).data?.path).toBe('mcpServers.u.resourcePriority');
    expect(configError({ mcpServers: { u: { command: 'node', resourcePriority: 'high' } } }).data?.path).toBe('mcpServers.u.resourcePriority');
  });

  it('an entry without command or a known type says what it needs', () => {
    expect(configError({ mcpServers: { u: { args: [] } } }).message).toContain('needs "command"');
    expect(configError({ mcpServers: { u: { type: 'ws', url: 'ws://x' } } }).message).toContain('unknown type "ws"');
    expect(configError({ mcpServers: { u: 'node x.js' } }).message).toContain('must be an object');
  });

  it('does not echo values of env, headers or tokens even when they are not from ${env:}', () => {
    const err = configError({ mcpServers: { r: { type: 'http', url: 'http://x/mcp', headers: { Authorization: 12345678 } } } });
    expect(err.data?.path).toBe('mcpServers.r.headers.Authorization');
    expect(err.message).not.toContain('12345678');
  });
});

describe('config errors never echo URL credentials', () => {
  it('a rest baseUrl with user:password is rejected without echoing them', () => {
    const err = configError({ mcpServers: { r: { type: 'rest', baseUrl: 'http://user:pw-marker@127.0.0.1:18711/api' } } });
    expect(err.data?.path).toBe('mcpServers.r.baseUrl');
    expect(err.message).toContain('may not carry credentials');
    expect(err.message).toContain('(got "http://***@127.0.0.1:18711/api")');
    expect(err.message).not.toMatch(/user|pw-marker/);
  });

  it('a malformed url with userinfo (an @ inside the password too) is echoed with ***', () => {
    const err = configError({ mcpServers: { h: { type: 'http', url: 'http://admin:p@ss-marker@exa mple/mcp' } } });
    expect(err.data?.path).toBe('mcpServers.h.url');
    expect(err.message).toContain('"http://***@exa mple/mcp"');
    expect(err.message).not.toMatch(/admin|ss-marker/);
  });
});

describe('server keys, reserved names and prefixes', () => {
  it('rejects keys with "__", bad characters, and the reserved broker/estate names', () => {
    expect(configError({ mcpServers: { a__b: { command: 'node' } } }).data?.path).toBe('mcpServers.a__b');
    expect(configError({ mcpServers: { '-x': { command: 'node' } } }).message).toContain('server key must match');
    for (const key of ['broker', 'estate', 'Broker']) {
      expect(configError({ mcpServers: { [key]: { command: 'node' } } }).message).toContain('reserved');
    }
    expect(configError({ mcpServers: { u: { command: 'node', prefix: 'estate' } } }).data?.path).toBe('mcpServers.u.prefix');
    expect(configError({ mcpServers: { u: { command: 'node', prefix: 'a b' } } }).data?.path).toBe('mcpServers.u.prefix');
  });

  it('two servers with one prefix collide, naming both; bare names (prefix false) and disabled servers do not', () => {
    const err = configError({ mcpServers: { a: { command: 'node', prefix: 'x' }, b: { command: 'node', prefix: 'x' } } });
    expect(err.data?.path).toBe('mcpServers.b.prefix');
    expect(err.message).toContain('mcpServers.a');
    const viaKey = configError({ mcpServers: { x: { command: 'node' }, b: { command: 'node', prefix: 'x' } } });
    expect(viaKey.data?.path).toBe('mcpServers.b.prefix');
    expect(() =>
      parseConfig({ mcpServers: { a: { command: 'node', prefix: false }, b: { command: 'node', prefix: false } } }, { baseDir: BASE, env: {} }),
    ).not.toThrow();
    expect(() =>
      parseConfig({ mcpServers: { x: { command: 'node' }, b: { command: 'node', prefix: 'x', disabled: true } } }, { baseDir: BASE, env: {} }),
    ).not.toThrow();
  });
});

describe('loadConfigFile', () => {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-broker-config-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('reads a file and resolves paths against its folder', () => {
    const file = join(dir, 'servers.json');
    writeFileSync(file, JSON.stringify({ mcpServers: { u: { command: 'node' } } }));
    const c = loadConfigFile(file, {});
    expect(c.file).toBe(file);
    expect(c.baseDir).toBe(dir);
    expect(c.broker.records.path).toBe(join(dir, 'data/calls.ndjson'));
  });

  it('regression: parsing twice never reuses the first config\'s resolved default paths', () => {
    const one = parseConfig({}, { baseDir: '/one', env: {} });
    const two = parseConfig({}, { baseDir: '/two', env: {} });
    expect(one.broker.records.path).toBe('/one/data/calls.ndjson');
    expect(two.broker.records.path).toBe('/two/data/calls.ndjson');
    expect(two.broker.dataDir).toBe('/two/data');
    expect(two.estate.root).toBe('/two/workspace');
  });

  it('a missing file and invalid JSON are ConfigErrors', () => {
    expect(() => loadConfigFile(join(dir, 'none.json'), {})).toThrow(/cannot read .*ENOENT/);
    const bad = join(dir, 'bad.json');
    writeFileSync(bad, '{"mcpServers": ');
    expect(() => loadConfigFile(bad, {})).toThrow(ConfigError);
    expect(() => loadConfigFile(bad, {})).toThrow(/not valid JSON/);
  });
});

describe('issue 18 §2: the configs clients write load as pasted', () => {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-broker-paste-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  /** Writes `text` to `dir/<rel>` and returns the path. */
  const put = (rel: string, text: string) => {
    const file = join(dir, rel);
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, text);
    return file;
  };
  const problemsOf = (fn: () => unknown): ConfigProblem[] => {
    try {
      fn();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      return [...(err as ConfigError).problems];
    }
    throw new Error('expected a ConfigError');
  };

  it('issue 18 §2: JSON with comments and trailing commas loads; each syntax error is named by line:column', () => {
    const file = put('jsonc/servers.json', '{\n  // the tools\n  "mcpServers": {\n    /* stdio */ "u": { "command": "node", "args": ["a.js",], },\n  },\n}\n');
    expect(loadConfigFile(file, {}).mcpServers.u).toMatchObject({ command: 'node', args: ['a.js'] });
    const bad = put('jsonc/bad.json', '{\n  "mcpServers": {\n    "u": { "command" "node" },\n    "v": { "command": "node", args: [] }\n  }\n}\n');
    const problems = problemsOf(() => loadConfigFile(bad, {}));
    expect(problems.length).toBeGreaterThan(2);
    expect(problems.map((p) => p.message)).toEqual([
      expect.stringMatching(/bad\.json:3:22: colon expected/),
      expect.stringMatching(/bad\.json:4:31: invalid symbol/),
      ...problems.slice(2).map(() => expect.stringMatching(/bad\.json:4:\d+: /)),
    ]);
  });

  it('the credential-named values a stdio child inherits (inheritEnv, broker.env.inherit) are secrets; other inherited values are not (they were never registered)', () => {
    const env = { GITHUB_TOKEN: 'ghp_inheritedvalue42', MY_API_KEY: 'hunter2-plain-value', HOME: '/home/me', LANG: 'C.UTF-8', DB_PASSWORD: 'pw-from-broker-inherit' };
    const c = parseConfig(
      { mcpServers: { gh: { command: 'node', inheritEnv: ['GITHUB_TOKEN', 'MY_API_KEY', 'LANG'] }, web: { type: 'http', url: 'https://h.example/mcp' } }, broker: { env: { inherit: ['HOME', 'DB_PASSWORD'] } } },
      { baseDir: BASE, env },
    );
    expect(c.secrets).toEqual(expect.arrayContaining(['ghp_inheritedvalue42', 'hunter2-plain-value', 'pw-from-broker-inherit']));
    expect(c.secrets).not.toContain('/home/me');
    expect(c.secrets).not.toContain('C.UTF-8');
    // Without a stdio server nothing is inherited, so nothing counts.
    expect(parseConfig({ mcpServers: { web: { type: 'http', url: 'https://h.example/mcp' } }, broker: { env: { inherit: ['DB_PASSWORD'] } } }, { baseDir: BASE, env }).secrets).toEqual([]);
  });

  it('a config nested thousands of levels deep is a config error naming the file (it overflowed the stack: exit 1, a RangeError)', () => {
    for (const depth of [300, 5000]) {
      const file = put(`deep-${depth}.json`, `{"mcpServers":{},"x":${'['.repeat(depth)}${']'.repeat(depth)}}`);
      expect(() => loadConfigFile(file, {})).toThrow(ConfigError);
      // Read in full, the depth check names the bound; a parser that overflows first (Node 24, 5,000 levels) is caught the same way.
      expect(() => loadConfigFile(file, {})).toThrow(/nested deeper than 256 levels|nested too deeply to read/);
    }
    // 200 levels is read (and refused for its unknown field, as any config would be).
    expect(() => loadConfigFile(put('deep-200.json', `{"mcpServers":{},"x":${'['.repeat(200)}${']'.repeat(200)}}`), {})).toThrow(/unknown field\(s\): x/);
  });

  it('a "__proto__" key, at the top or as a server key, is a config error naming where (it was silently skipped)', () => {
    const server = put('proto-server.json', '{"mcpServers":{"__proto__":{"command":"node","args":["x.js"]}}}');
    expect(() => loadConfigFile(server, {})).toThrow(/mcpServers: has a key "__proto__"/);
    const top = put('proto-top.json', '{"mcpServers":{},"__proto__":{"x":1}}');
    expect(() => loadConfigFile(top, {})).toThrow(/has a key "__proto__"/);
  });

  it('a "__proto__" key with any value (a number, a string, a boolean, an array), however spelled, is a config error naming where (one not an object or null was dropped: the server started without it)', () => {
    const cases: [string, RegExp][] = [
      ['{"mcpServers":{"__proto__":1,"ok":{"command":"node"}}}', /^mcpServers: has a key "__proto__"/],
      ['{"mcpServers":{"ok":{"command":"node","env":{"__proto__":"x","A":"1"}}}}', /^mcpServers\.ok\.env: has a key "__proto__"/],
      ['{"mcpServers":{"ok":{"command":"node","env":{"\\u005f_proto__":"x"}}}}', /^mcpServers\.ok\.env: has a key "__proto__"/],
      ['{"mcpServers":{"ok":{"command":"node","args":[{"__proto__":[]}]}}}', /^mcpServers\.ok\.args\[0\]: has a key "__proto__"/],
      ['{"mcpServers":{}, /* a comment */ "__proto__":true,}', /proto-any-4\.json: has a key "__proto__"/],
    ];
    cases.forEach(([text, message], i) => {
      const file = put(`proto-any-${i}.json`, text);
      expect(() => loadConfigFile(file, {}), text).toThrow(ConfigError);
      expect(() => loadConfigFile(file, {}), text).toThrow(message);
    });
    // Two at once: both named.
    const both = put('proto-both.json', '{"mcpServers":{"__proto__":1,"ok":{"command":"node","env":{"__proto__":"x"}}}}');
    expect(() => loadConfigFile(both, {})).toThrow(/mcpServers: has a key "__proto__".*; mcpServers\.ok\.env: has a key "__proto__"/);
  });

  it('issue 18 §2: a Claude Desktop claude_desktop_config.json loads as pasted', () => {
    const file = put(
      'desktop/claude_desktop_config.json',
      JSON.stringify({
        mcpServers: {
          filesystem: { command: 'npx', args: ['-y', '@modelcontextprotocol/server-filesystem', '/Users/me/Desktop'] },
          github: { command: 'docker', args: ['run', '-i', '--rm', '-e', 'GITHUB_PERSONAL_ACCESS_TOKEN', 'ghcr.io/github/github-mcp-server'], env: { GITHUB_PERSONAL_ACCESS_TOKEN: 'ghp_0123456789abcdef' } },
        },
      }),
    );
    const c = loadConfigFile(file, {});
    expect(c.mcpServers.github).toMatchObject({ command: 'docker', env: { GITHUB_PERSONAL_ACCESS_TOKEN: 'ghp_0123456789abcdef' } });
    expect(c.secrets).toContain('ghp_0123456789abcdef');
  });

  it('issue 18 §2: a Claude Code .mcp.json with type http, a URL-only entry, ${VAR} and ${VAR:-default} loads', () => {
    const file = put(
      'code/.mcp.json',
      JSON.stringify({
        mcpServers: {
          sentry: { type: 'http', url: 'https://mcp.sentry.dev/mcp', headers: { Authorization: 'Bearer ${SENTRY_TOKEN}' } },
          linear: { url: '${LINEAR_URL:-https://mcp.linear.app/sse}' },
          local: { command: '${HOME}/bin/server', args: ['--port', '${PORT:-3000}'], env: { LEVEL: '${LEVEL:-info}' } },
        },
      }),
    );
    const c = loadConfigFile(file, { SENTRY_TOKEN: 'sntrys_secret_123', HOME: '/home/me', PORT: '' });
    expect(c.mcpServers.sentry).toMatchObject({ type: 'http', headers: { Authorization: 'Bearer sntrys_secret_123' } });
    expect(c.mcpServers.linear).toMatchObject({ url: 'https://mcp.linear.app/sse' });
    expect((c.mcpServers.linear as { type?: string }).type).toBeUndefined();
    expect(serverKind(c.mcpServers.linear!)).toBe('http');
    // An empty variable takes the default, as in the shell.
    expect(c.mcpServers.local).toMatchObject({ command: '/home/me/bin/server', args: ['--port', '3000'], env: { LEVEL: 'info' } });
    expect(c.secrets).toContain('sntrys_secret_123');
  });

  it('issue 18 §2: a Cursor ~/.cursor/mcp.json with URL-only entries and ${env:VAR:-default} loads', () => {
    const file = put(
      'home/.cursor/mcp.json',
      '{\n  "mcpServers": {\n    // remote, Streamable HTTP or SSE\n    "context7": { "url": "https://mcp.context7.com/mcp", "headers": { "CONTEXT7_API_KEY": "${env:C7_KEY:-none}" } },\n    "local": { "command": "node", "args": ["${userHome}/srv/index.js"] },\n  }\n}\n',
    );
    const c = loadConfigFile(file, {}, { userHome: '/home/me' });
    expect(c.mcpServers.context7).toMatchObject({ url: 'https://mcp.context7.com/mcp', headers: { CONTEXT7_API_KEY: 'none' } });
    expect(c.mcpServers.local).toMatchObject({ args: ['/home/me/srv/index.js'] });
  });

  it('issue 18 §2: a VS Code .vscode/mcp.json with servers, inputs, envFile and ${workspaceFolder} loads', () => {
    put('vscode/.vscode/.env', '# keys\nexport FROM_FILE=file-value\nSHARED="from file"\nQUOTED=\'a b\' # note\nEMPTY=\n');
    const file = put(
      'vscode/.vscode/mcp.json',
      JSON.stringify({
        inputs: [{ type: 'promptString', id: 'perplexity-key', description: 'Perplexity API Key', password: true }],
        servers: {
          perplexity: {
            type: 'stdio',
            command: 'npx',
            args: ['-y', 'server-perplexity-ask', '${workspaceFolder}'],
            env: { PERPLEXITY_API_KEY: '${input:perplexity-key}', SHARED: 'from env' },
            envFile: '${workspaceFolder}/.vscode/.env',
          },
          github: { type: 'http', url: 'https://api.githubcopilot.com/mcp/' },
        },
      }),
    );
    const c = loadConfigFile(file, { MCP_BROKER_INPUT_PERPLEXITY_KEY: 'pplx-0123456789' });
    expect(Object.keys(c.mcpServers)).toEqual(['perplexity', 'github']);
    expect((c as { servers?: unknown }).servers).toBeUndefined();
    const p = c.mcpServers.perplexity as { args: string[]; env: Record<string, string>; envFile?: string };
    expect(p.args[2]).toBe(join(dir, 'vscode'));
    expect(p.env).toEqual({ FROM_FILE: 'file-value', SHARED: 'from env', QUOTED: 'a b', EMPTY: '', PERPLEXITY_API_KEY: 'pplx-0123456789' });
    expect(p.envFile).toBeUndefined();
    expect(c.secrets).toContain('pplx-0123456789');
  });

  it('issue 18 §2: an ${input:id} without a value names the input and the variable to set; an undeclared one names "inputs"', () => {
    const raw = { inputs: [{ type: 'promptString', id: 'api-key' }], servers: { s: { command: 'x', env: { K: '${input:api-key}' } } } };
    expect(problemsOf(() => parseConfig(raw, { baseDir: BASE, env: {} }))).toEqual([
      { path: 'servers.s.env.K', message: expect.stringContaining('set MCP_BROKER_INPUT_API_KEY') },
    ]);
    // A declared default stands in for an unset (or empty) variable.
    const withDefault = { inputs: [{ type: 'promptString', id: 'region', default: 'eu-west-1' }], servers: { s: { command: 'x', args: ['${input:region}'] } } };
    expect((parseConfig(withDefault, { baseDir: BASE, env: {} }).mcpServers.s as { args: string[] }).args).toEqual(['eu-west-1']);
    expect((parseConfig(withDefault, { baseDir: BASE, env: { MCP_BROKER_INPUT_REGION: 'us-east-2' } }).mcpServers.s as { args: string[] }).args).toEqual(['us-east-2']);
    const undeclared = problemsOf(() => parseConfig({ mcpServers: { s: { command: 'x', args: ['${input:nope}'] } } }, { baseDir: BASE, env: {} }));
    expect(undeclared).toEqual([{ path: 'mcpServers.s.args[0]', message: expect.stringContaining('names no entry of "inputs"') }]);
  });

  it('issue 18 §2: a placeholder we do not understand is a config error naming its path, never text handed to a child', () => {
    const raw = {
      mcpServers: {
        s: { command: 'x', args: ['${config:mcp.root}/a', '${env:A-B}', 'half ${env:X'], env: { K: '${command:pick}' } },
      },
    };
    const problems = problemsOf(() => parseConfig(raw, { baseDir: BASE, env: { X: 'x' } }));
    expect(problems.map((p) => p.path)).toEqual(['mcpServers.s.args[0]', 'mcpServers.s.args[1]', 'mcpServers.s.args[2]', 'mcpServers.s.env.K']);
    expect(problems[0]!.message).toContain('unknown placeholder "${config:mcp.root}"');
    expect(problems[2]!.message).toContain('no "}" closes');
  });

  it('issue 18 §2: every problem is listed at once, one each, never "(and N more)"', () => {
    const raw = {
      mcpServers: {
        a__b: { command: 'node' },
        u: { command: 7, args: ['${env:UNSET_ONE}'] },
        h: { type: 'http', url: 'not a url' },
      },
      broker: { timeoutMs: 0 },
      principals: { local: { token: 'short' } },
    };
    const err = configError(raw);
    expect(err.problems.map((p) => p.path)).toEqual(
      expect.arrayContaining(['mcpServers.a__b', 'mcpServers.u.args[0]', 'mcpServers.u.command', 'mcpServers.h.url', 'broker.timeoutMs', 'principals.local.token']),
    );
    expect(err.problems.length).toBe(6);
    expect(err.message).not.toMatch(/and \d+ more/);
    for (const p of err.problems) expect(p.message).not.toContain('\n');
    // Cross-field problems are listed together too.
    const cross = configError({ mcpServers: { a: { command: 'n', prefix: 'x' }, b: { command: 'n', prefix: 'x' }, c: { command: 'n', prefix: 'estate' } } });
    expect(cross.problems.map((p) => p.path)).toEqual(['mcpServers.b.prefix', 'mcpServers.c.prefix']);
  });

  it('issue 18 §2: "servers" and "mcpServers" together is a config error; errors in a VS Code file name "servers"', () => {
    expect(configError({ servers: {}, mcpServers: {} }).problems).toEqual([{ path: 'servers', message: expect.stringContaining('not both') }]);
    expect(configError({ servers: { s: { command: 3 } } }).data?.path).toBe('servers.s.command');
    expect(configError({ servers: { a: { command: 'n', prefix: 'x' }, b: { command: 'n', prefix: 'x' } } }).message).toContain('already used by servers.a');
  });

  it('issue 18 §2: a missing or malformed envFile names the field and the line, never a value or the folder', () => {
    put('envs/bad.env', 'GOOD=1\nthis is not a pair sk-secret-xyz\n');
    const missing = problemsOf(() => parseConfig({ mcpServers: { s: { command: 'x', envFile: 'none.env' } } }, { baseDir: join(dir, 'envs'), env: {} }));
    expect(missing).toEqual([{ path: 'mcpServers.s.envFile', message: 'cannot read none.env (ENOENT)' }]);
    const bad = problemsOf(() => parseConfig({ mcpServers: { s: { command: 'x', envFile: 'bad.env' } } }, { baseDir: join(dir, 'envs'), env: {} }));
    expect(bad).toEqual([{ path: 'mcpServers.s.envFile', message: 'bad.env line 2 is not NAME=value' }]);
    expect(configError({ mcpServers: { h: { type: 'http', url: 'http://x/mcp', envFile: '.env' } } }).message).toContain('unknown field(s): envFile');
    // A schema error elsewhere hid the envFile's problem: now both are listed.
    const both = problemsOf(() => parseConfig({ mcpServers: { s: { command: 'x', envFile: 'bad.env' } }, broker: { timeoutMs: 'x' } }, { baseDir: join(dir, 'envs'), env: {} }));
    expect(both.map((p) => p.path).sort()).toEqual(['broker.timeoutMs', 'mcpServers.s.envFile']);
  });

  it('issue 18 §2: loadConfigFileAsking asks only for inputs without their variable, in order of use; answers are secrets', async () => {
    const file = put(
      'ask/mcp.json',
      JSON.stringify({
        inputs: [
          { type: 'promptString', id: 'b', description: 'B' },
          { type: 'promptString', id: 'a', password: true },
          { type: 'promptString', id: 'unused' },
        ],
        servers: { s: { command: 'x', args: ['${input:a}', '${input:b}', '${input:a}'] } },
      }),
    );
    const asked: string[] = [];
    const c = await loadConfigFileAsking(file, async (input) => (asked.push(input.id), `answer-${input.id}-0000`), { MCP_BROKER_INPUT_B: 'from-env-b' });
    expect(asked).toEqual(['a']);
    expect((c.mcpServers.s as { args: string[] }).args).toEqual(['answer-a-0000', 'from-env-b', 'answer-a-0000']);
    expect(c.secrets).toEqual(expect.arrayContaining(['answer-a-0000', 'from-env-b']));
  });
});
