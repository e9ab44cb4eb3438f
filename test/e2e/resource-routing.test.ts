/**
 * Resource routing through the CLI: URIs of every RFC 6570 form reach the upstream whose template
 * they expand, `ref/resource` completions reach the upstream whose template it is, and one URI or
 * template listed by two upstreams follows a stated rule (`resourcePriority`, then config order)
 * with one logged warning per clash.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, nodeServer, startBroker, waitFor, type StartedBroker } from './helpers.js';

const FORMS = ['tpl://search{?q,limit}', 'tpl://files{/path*}', 'tpl://doc{#frag}', 'tpl://file{.ext}', 'tpl://matrix{;p}', 'tpl://plain/{id}'];

const templates = (name: string, list: string[], resources: string[] = [], more: Record<string, unknown> = {}) =>
  nodeServer(fixture('templates.mjs'), {
    env: { FIXTURE_NAME: name, FIXTURE_TEMPLATES: JSON.stringify(list), FIXTURE_RESOURCES: JSON.stringify(resources) },
    ...more,
  });

const readText = async (broker: StartedBroker, uri: string) => {
  const { contents } = await broker.client.readResource({ uri });
  return (contents[0] as { text: string }).text;
};

describe('resource templates of every RFC 6570 form', () => {
  let broker: StartedBroker;
  beforeAll(async () => {
    // A second upstream with resources, so no URI reaches `tpl` by being the only resource server.
    broker = await startBroker({ servers: { tpl: templates('tpl', FORMS), other: templates('other', ['other://{id}']) } });
  }, 60_000);
  afterAll(async () => broker?.close());

  it.each([
    ['{?q,limit}', ['tpl://search?q=cats&limit=3', 'tpl://search?limit=3', 'tpl://search']],
    ['{/path*}', ['tpl://files/a/b%20c/d.txt', 'tpl://files/a', 'tpl://files']],
    ['{#frag}', ['tpl://doc#part/2', 'tpl://doc#x', 'tpl://doc']],
    ['{.ext}', ['tpl://file.txt', 'tpl://file.tar.gz', 'tpl://file']],
    ['{;p}', ['tpl://matrix;p=1', 'tpl://matrix;p', 'tpl://matrix']],
    ['{id} (level 1, as before)', ['tpl://plain/42']],
  ])('a read of a URI of the %s form reaches the upstream whose template it expands', async (_form, uris) => {
    for (const uri of uris) expect(await readText(broker, uri), uri).toBe(`tpl read ${uri}`);
  });

  it('a URI that expands no template is not found (-32602, what SDK v2 sends for -32002), though some template nearly fits', async () => {
    for (const uri of ['tpl://search?limit=3&q=cats', 'tpl://plain/4/2', 'tpl://matrix;q=1', 'nobody://x']) {
      await expect(broker.client.readResource({ uri }), uri).rejects.toMatchObject({ code: -32602, message: `Resource not found: ${uri}` });
    }
  });

  it('completing the template of every form routes to the upstream whose template it is', async () => {
    for (const uri of FORMS) {
      const { completion } = await broker.client.complete({ ref: { type: 'ref/resource', uri }, argument: { name: 'x', value: '' } });
      expect(completion.values, uri).toEqual(['tpl-value']);
    }
  });
});

describe('one resource URI or template from two upstreams', () => {
  const a = (more: Record<string, unknown> = {}) => templates('a', ['shared://item/{id}'], ['shared://doc'], more);
  const b = (more: Record<string, unknown> = {}) => templates('b', ['shared://item/{id}', 'shared://item/b-{id}'], ['shared://doc'], more);
  const warningsNow = (broker: StartedBroker) => broker.stderr().split('\n').filter((l) => l.includes('two upstreams serve one resource'));
  /** The clash warnings, once two have arrived on the broker's stderr (a pipe read as it comes, so after the answers that followed them). */
  const warnings = (broker: StartedBroker) => waitFor(() => (warningsNow(broker).length >= 2 ? warningsNow(broker) : undefined), 'two clash warnings on stderr');

  it('the earlier server in config order serves it, the copy is withheld from the lists, and each clash is logged once', async () => {
    const broker = await startBroker({ servers: { a: a(), b: b() } });
    try {
      expect(await readText(broker, 'shared://doc')).toBe('a read shared://doc');
      expect(await readText(broker, 'shared://item/7')).toBe('a read shared://item/7');
      const { resources } = await broker.client.listResources();
      expect(resources.filter((r) => r.uri === 'shared://doc').map((r) => r.name)).toEqual(['a shared://doc']);
      const { resourceTemplates } = await broker.client.listResourceTemplates();
      expect(resourceTemplates.filter((t) => t.uriTemplate === 'shared://item/{id}').map((t) => t.name)).toEqual(['a shared://item/{id}']);
      const { completion } = await broker.client.complete({ ref: { type: 'ref/resource', uri: 'shared://item/{id}' }, argument: { name: 'id', value: '' } });
      expect(completion.values).toEqual(['a-value']);
      // The rule never looks at list order: several rebuilds at start, one warning per clash, naming both servers.
      const lines = await warnings(broker);
      expect(lines).toHaveLength(2);
      expect(lines.filter((l) => l.includes('"uri":"shared://doc"'))).toHaveLength(1);
      expect(lines.filter((l) => l.includes('"uriTemplate":"shared://item/{id}"'))).toHaveLength(1);
      for (const l of lines) expect(l).toMatch(/"kept":"a".*"withheld":"b"/);
    } finally {
      await broker.close();
    }
  }, 60_000);

  it('resourcePriority chooses the server, whatever the config order', async () => {
    const broker = await startBroker({ servers: { a: a(), b: b({ resourcePriority: 1 }) } });
    try {
      expect(await readText(broker, 'shared://doc')).toBe('b read shared://doc');
      expect(await readText(broker, 'shared://item/7')).toBe('b read shared://item/7');
      const { completion } = await broker.client.complete({ ref: { type: 'ref/resource', uri: 'shared://item/{id}' }, argument: { name: 'id', value: '' } });
      expect(completion.values).toEqual(['b-value']);
      const lines = await warnings(broker);
      expect(lines).toHaveLength(2);
      for (const l of lines) expect(l).toMatch(/"kept":"b".*"withheld":"a"/);
    } finally {
      await broker.close();
    }
  }, 60_000);

  it('of two templates a URI expands, the more specific serves it, not the first in config order', async () => {
    const broker = await startBroker({ servers: { a: a(), b: b() } });
    try {
      expect(await readText(broker, 'shared://item/b-7')).toBe('b read shared://item/b-7');
      expect(await readText(broker, 'shared://item/c-7')).toBe('a read shared://item/c-7');
    } finally {
      await broker.close();
    }
  }, 60_000);
});
