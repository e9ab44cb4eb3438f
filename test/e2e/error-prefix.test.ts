/**
 * Reasons say the SDK prefix once (issue 17 §11), on the wire too: SDK v1's McpError put
 * `MCP error <code>: ` before a message and sent it so, and a v1 client's McpError added it
 * again (`MCP error -32602: MCP error -32602: Unknown tool`). The test client is SDK v2, whose
 * ProtocolError adds no prefix: what it reads is the wire message, which carries none.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, nodeServer, startBroker, type StartedBroker } from './helpers.js';
import { withoutErrorPrefix } from '../../src/transports/error-prefix.js';

describe('JSON-RPC error messages on the wire', () => {
  let broker: StartedBroker;
  beforeAll(async () => {
    broker = await startBroker({ servers: { echo: nodeServer(fixture('echo.mjs')) } });
  });
  afterAll(() => broker?.close());

  it('an unknown tool said "MCP error -32602: MCP error -32602: Unknown tool": now no prefix on the wire (a v1 client says it once)', async () => {
    const err = await broker.client.callTool({ name: 'echo__nope', arguments: {} }).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err).toMatchObject({ code: -32602 });
    expect(err?.message).toMatch(/^Unknown tool: echo__nope/);
    expect(err?.message).not.toContain('MCP error');
  });

  it('an unknown prompt likewise', async () => {
    const err = await broker.client.getPrompt({ name: 'echo__nope' }).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err).toMatchObject({ code: -32602 });
    expect(err?.message).toMatch(/^Unknown prompt: echo__nope/);
    expect(err?.message).not.toContain('MCP error');
  });

  it('withoutErrorPrefix takes off every leading prefix of the same code only', () => {
    expect(withoutErrorPrefix('MCP error -32602: MCP error -32602: x', -32602)).toBe('x');
    expect(withoutErrorPrefix('MCP error -32603: x', -32602)).toBe('MCP error -32603: x');
    expect(withoutErrorPrefix('plain', -32602)).toBe('plain');
  });
});
