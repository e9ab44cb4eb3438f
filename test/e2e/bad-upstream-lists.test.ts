/**
 * An upstream whose lists hold entries that are no valid MCP entries (a `null`, a tool with no
 * inputSchema, a number for a name, a uri or a uriTemplate): each such entry is withheld with a
 * warning, the rest served, and the other upstreams' entries with them. A `null` entry killed the
 * broker (exit 1, a TypeError), at start and after a `list_changed`; an invalid tool, passed on,
 * made an SDK client refuse the whole merged list (found by a review, run end to end).
 */
import type { CallToolResult } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, nodeServer, startBroker, waitFor, type StartedBroker } from './helpers.js';

let broker: StartedBroker;
beforeAll(async () => {
  broker = await startBroker({ servers: { bad: nodeServer(fixture('bad-lists.mjs')), e: nodeServer(fixture('echo.mjs')) } });
});
afterAll(async () => broker?.close());

const text = (r: CallToolResult) => (r.content[0] as { text: string }).text;

describe('an upstream listing invalid entries', () => {
  it('serves its valid entries and every other upstream; the SDK client accepts every list; a warning names the kind', async () => {
    const tools = (await broker.client.listTools()).tools.map((t) => t.name);
    expect(tools).toEqual(expect.arrayContaining(['bad__ok', 'bad__flip', 'e__echo']));
    expect(tools.filter((n) => n.startsWith('bad__')).sort()).toEqual(['bad__badresult', 'bad__flip', 'bad__ok']);
    expect((await broker.client.listPrompts()).prompts.map((p) => p.name)).toContain('bad__fine');
    expect((await broker.client.listResources()).resources.map((r) => r.uri)).toContain('bad://ok');
    expect((await broker.client.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate)).toContain('bad://{x}');
    expect(text((await broker.client.callTool({ name: 'e__echo', arguments: { text: 'still here' } })) as CallToolResult)).toBe('still here');
    expect(broker.stderr()).toContain('no valid MCP entries');
  });

  it('a prompts/get or resources/read answered with neither a result object nor an error fails at once, not at its deadline (it waited it out)', async () => {
    // The broker's own error, not a timeout (the SDK's 20 s here, the broker's 60 s deadline).
    await expect(broker.client.getPrompt({ name: 'bad__fine' }, { timeout: 20_000 })).rejects.toThrow(/neither a result nor an error/);
    await expect(broker.client.readResource({ uri: 'bad://ok' }, { timeout: 20_000 })).rejects.toThrow(/neither a result nor an error/);
  });

  it('a tools/call result that is no valid CallToolResult is refused upstream_error and recorded so (it was passed on, recorded ok)', async () => {
    const answer = (await broker.client.callTool({ name: 'bad__badresult', arguments: {} })) as CallToolResult;
    expect(answer.isError).toBe(true);
    expect(answer._meta?.['mcp-broker/outcome']).toBe('upstream_error');
    expect(text(answer)).toContain('"content" that is no array');
    const records = await broker.records();
    expect(records.filter((r) => r.name === 'bad__badresult').map((r) => r.outcome)).toEqual(['upstream_error']);
  });

  it('a list_changed to a list of only null withdraws its tools; the broker keeps serving the others', async () => {
    expect(text((await broker.client.callTool({ name: 'bad__flip', arguments: {} })) as CallToolResult)).toBe('flip');
    await waitFor(async () => !(await broker.client.listTools()).tools.some((t) => t.name === 'bad__ok'), 'the flipped list');
    expect(text((await broker.client.callTool({ name: 'e__echo', arguments: { text: 'after' } })) as CallToolResult)).toBe('after');
  });
});
