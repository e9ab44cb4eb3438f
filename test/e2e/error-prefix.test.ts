/**
 * Reasons say the SDK prefix once (issue 17 §11), on the wire too: the SDK's McpError puts
 * `MCP error <code>: ` before a message and sends it so, and the client's McpError added it
 * again (`MCP error -32602: MCP error -32602: Unknown tool`).
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

  it('an unknown tool said "MCP error -32602: MCP error -32602: Unknown tool": now the prefix once', async () => {
    const err = await broker.client.callTool({ name: 'echo__nope', arguments: {} }).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.message).toMatch(/^MCP error -32602: Unknown tool: echo__nope/);
    expect(err?.message.match(/MCP error/g)).toHaveLength(1);
  });

  it('an unknown prompt likewise', async () => {
    const err = await broker.client.getPrompt({ name: 'echo__nope' }).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.message.match(/MCP error -32602/g)).toHaveLength(1);
  });

  it('withoutErrorPrefix takes off every leading prefix of the same code only', () => {
    expect(withoutErrorPrefix('MCP error -32602: MCP error -32602: x', -32602)).toBe('x');
    expect(withoutErrorPrefix('MCP error -32603: x', -32602)).toBe('MCP error -32603: x');
    expect(withoutErrorPrefix('plain', -32602)).toBe('plain');
  });
});
