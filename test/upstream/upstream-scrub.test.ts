/**
 * The upstream boundary scrubs what turns toward clients (issue 12 item 6): the roster built
 * from catalogs, relayed log messages, and replies and failures of `Registry.request`; and the
 * Scrubber's helpers for it (`strings` for schemas, `media` and `blob` for binary content).
 */
import { EventEmitter } from 'node:events';
import { ProtocolError, SdkError, SdkErrorCode } from '@modelcontextprotocol/client';
import { describe, expect, it } from 'vitest';
import { BrokerError } from '../../src/shared/errors.js';
import { silentLogger } from '../../src/shared/logger.js';
import { REDACTED, Scrubber } from '../../src/shared/scrub.js';
import { Registry } from '../../src/upstream/registry.js';
import type { Upstream, UpstreamCatalog, UpstreamEvents, UpstreamStatus } from '../../src/upstream/types.js';

const SECRET = 'injected-env-value-7f3a';
const scrubber = new Scrubber([SECRET]);
const b64 = (t: string) => Buffer.from(t, 'utf8').toString('base64');

/** A stand-in upstream: a catalog, events, and a `request` answered by the test. */
class FakeUpstream extends EventEmitter<UpstreamEvents> {
  readonly kind = 'stdio' as const;
  readonly secrets: string[] = [];
  status: UpstreamStatus = { state: 'ready' };
  capabilities = undefined;
  constructor(
    readonly name: string,
    public catalog: UpstreamCatalog,
    public answer: () => Promise<Record<string, unknown>> = async () => ({}),
  ) {
    super();
  }
  request(): Promise<Record<string, unknown>> {
    return this.answer();
  }
}

function setup(catalog: Partial<UpstreamCatalog> = {}, answer?: () => Promise<Record<string, unknown>>) {
  const registry = new Registry(silentLogger(), scrubber);
  const up = new FakeUpstream('up', { tools: [], prompts: [], resources: [], resourceTemplates: [], ...catalog }, answer);
  registry.add({ upstream: up as unknown as Upstream, prefix: 'up' });
  return { registry, up, roster: registry.rebuild() };
}

describe('Registry scrubs what upstreams send toward clients', () => {
  it('issue 12: a secret in a tool title, description, schema description or annotation never reaches the roster; schemas keep working', () => {
    const inputSchema = { type: 'object' as const, properties: { password: { type: 'string', description: `e.g. ${SECRET}` }, api_key: { type: 'string' } } };
    const { roster } = setup({ tools: [{ name: 'use', title: `t ${SECRET}`, description: `d ${SECRET}`, inputSchema, annotations: { title: `a ${SECRET}` } }] });
    const tool = roster.tools.get('up__use')!;
    expect(JSON.stringify(tool)).not.toContain(SECRET);
    expect(tool.definition).toMatchObject({ title: `t ${REDACTED}`, description: `d ${REDACTED}`, annotations: { title: `a ${REDACTED}` } });
    // A property called `password` names a parameter: its schema survives whole.
    expect(tool.definition.inputSchema).toEqual({ type: 'object', properties: { password: { type: 'string', description: `e.g. ${REDACTED}` }, api_key: { type: 'string' } } });
    expect(tool.toolName).toBe('use');
  });

  it('issue 12: prompt, resource and template descriptions are scrubbed; clean lists keep their identity across rebuilds', () => {
    const resources = [{ uri: 'x://clean', name: 'clean' }];
    const { registry, roster } = setup({
      prompts: [{ name: 'p', description: `p ${SECRET}`, arguments: [{ name: 'a', description: `a ${SECRET}` }] }],
      resources,
      resourceTemplates: [{ uriTemplate: 'x://{id}', name: 't', description: `t ${SECRET}` }],
    });
    expect(JSON.stringify([[...roster.prompts.values()], roster.resourceTemplates])).not.toContain(SECRET);
    expect(roster.resources.get('x://clean')!.resource).toBe(resources[0]);
    expect(registry.rebuild().prompts.get('up__p')!.definition.description).toBe(`p ${REDACTED}`);
  });

  it('a secret added later (a reload) is scrubbed from lists scrubbed and cached before it, at the next rebuild (regression: the cached lists were served as scrubbed then)', () => {
    const later = 'became-a-secret-on-reload-91c2';
    const own = new Scrubber([SECRET]);
    const registry = new Registry(silentLogger(), own);
    const up = new FakeUpstream('up', { tools: [{ name: 'use', description: `d ${later}`, inputSchema: { type: 'object' } }], prompts: [{ name: 'p', description: `p ${later}` }], resources: [], resourceTemplates: [] });
    registry.add({ upstream: up as unknown as Upstream, prefix: 'up' });
    expect(registry.rebuild().tools.get('up__use')!.definition.description).toBe(`d ${later}`);
    own.addSecrets([later]);
    const roster = registry.rebuild();
    expect(roster.tools.get('up__use')!.definition.description).toBe(`d ${REDACTED}`);
    expect(roster.prompts.get('up__p')!.definition.description).toBe(`p ${REDACTED}`);
  });

  it('issue 12: a relayed notifications/message has its logger and data scrubbed', () => {
    const { registry, up } = setup();
    const seen: unknown[] = [];
    registry.on('log', (params) => seen.push(params));
    up.emit('log', { level: 'info', logger: `lg ${SECRET}`, data: { note: SECRET } }, undefined);
    expect(seen).toEqual([{ level: 'info', logger: `lg ${REDACTED}`, data: { note: REDACTED } }]);
  });

  it('issue 12: a reply to prompts/get or resources/read is scrubbed, text blobs included; binary and image data are untouched', async () => {
    const binary = Buffer.from([0xff, 0xfe, 0x00, 0x41]).toString('base64');
    const image = `iVBORw0KGgoAIza${'A'.repeat(35)}`;
    const reply = {
      contents: [
        { uri: 'x://a', text: `t ${SECRET}` },
        { uri: 'x://b', blob: b64(`b ${SECRET}`) },
        { uri: 'x://c', blob: binary },
      ],
      messages: [{ role: 'user', content: { type: 'image', data: image, mimeType: 'image/png' } }],
    };
    const { registry } = setup({}, async () => reply);
    const out = (await registry.request('up', 'resources/read', { uri: 'x://a' }, { timeoutMs: 1000 })) as typeof reply;
    expect(out.contents[0]!.text).toBe(`t ${REDACTED}`);
    expect(Buffer.from(out.contents[1]!.blob!, 'base64').toString('utf8')).toBe(`b ${REDACTED}`);
    expect(out.contents[2]!.blob).toBe(binary);
    expect(out.messages[0]!.content.data).toBe(image);
  });

  it('issue 12: a failed request is a ProtocolError with message and data scrubbed; the upstream code is kept', async () => {
    const { registry, up } = setup({}, async () => {
      throw new ProtocolError(-32002, `no such thing, ${SECRET}`, { why: SECRET });
    });
    const failed = await registry.request('up', 'resources/read', {}, { timeoutMs: 1000 }).catch((e: unknown) => e as ProtocolError);
    expect(failed).toBeInstanceOf(ProtocolError);
    expect(failed).toMatchObject({ code: -32002, data: { why: REDACTED } });
    expect((failed as ProtocolError).message).toContain(`no such thing, ${REDACTED}`);
    expect((failed as ProtocolError).message).not.toContain(SECRET);

    up.answer = async () => {
      throw new BrokerError('upstream_unavailable', `upstream "up" is not connected (failed: last stderr: ${SECRET})`);
    };
    const down = await registry.request('up', 'prompts/get', {}, { timeoutMs: 1000 }).catch((e: unknown) => e as ProtocolError);
    expect(down).toMatchObject({ code: -32603 });
    expect((down as ProtocolError).message).not.toContain(SECRET);
    await expect(registry.request('nope', 'prompts/get', {}, { timeoutMs: 1000 })).rejects.toMatchObject({ code: -32602 });
  });

  it("the SDK's own timeout and closed connection keep the codes SDK v1 gave them (-32001, -32000), scrubbed", async () => {
    const { registry, up } = setup({}, async () => {
      throw new SdkError(SdkErrorCode.RequestTimeout, `Request timed out ${SECRET}`);
    });
    const timedOut = await registry.request('up', 'prompts/get', {}, { timeoutMs: 1000 }).catch((e: unknown) => e as ProtocolError);
    expect(timedOut).toBeInstanceOf(ProtocolError);
    expect(timedOut).toMatchObject({ code: -32001 });
    expect((timedOut as ProtocolError).message).not.toContain(SECRET);
    up.answer = async () => {
      throw new SdkError(SdkErrorCode.ConnectionClosed, 'Connection closed');
    };
    await expect(registry.request('up', 'prompts/get', {}, { timeoutMs: 1000 })).rejects.toMatchObject({ code: -32000, message: 'Connection closed' });
  });
});

describe('Scrubber helpers for upstream content', () => {
  it('strings: every string and key through text(), with no field-name rule', () => {
    const schema = { type: 'object', properties: { token: { type: 'string', default: SECRET }, [SECRET]: { type: 'number' } } };
    expect(scrubber.strings(schema)).toEqual({ type: 'object', properties: { token: { type: 'string', default: REDACTED }, [REDACTED]: { type: 'number' } } });
    const clean = { type: 'object', properties: { password: { type: 'string' } } };
    expect(scrubber.strings(clean)).toBe(clean);
  });

  it('blob: UTF-8 text is scrubbed and re-encoded; binary and clean blobs are the same string', () => {
    expect(Buffer.from(scrubber.blob(b64(`x ${SECRET}`)), 'base64').toString('utf8')).toBe(`x ${REDACTED}`);
    const clean = b64('nothing here');
    expect(scrubber.blob(clean)).toBe(clean);
    const binary = Buffer.from([0xc3, 0x28, 0xff]).toString('base64');
    expect(scrubber.blob(binary)).toBe(binary);
  });

  it('media: like value(), but blobs are decoded and image/audio data left alone; credential-named fields still redacted', () => {
    const value = { blob: b64(SECRET), content: { type: 'audio', data: `AIza${'B'.repeat(35)}` }, password: 'hunter22', data: `plain ${SECRET}` };
    const out = scrubber.media(value);
    expect(Buffer.from(out.blob, 'base64').toString('utf8')).toBe(REDACTED);
    expect(out.content).toBe(value.content);
    expect(out.password).toBe(REDACTED);
    expect(out.data).toBe(`plain ${REDACTED}`);
  });
});
