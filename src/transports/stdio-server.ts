/**
 * The server side of stdio: our own `Transport` over the process's stdin/stdout with the same
 * linear framing as upstream children (issue 6 §3). The SDK's `StdioServerTransport` refuses
 * messages over 10 MiB and grows its buffer quadratically; this one is linear and bounded by
 * `maxMessageBytes`. A line that is not JSON gets a JSON-RPC parse error (-32700), and serving goes on;
 * a request over the limit gets -32600 naming the limit (with its id when its ends show it).
 */
import type { Readable, Writable } from 'node:stream';
import type { Transport, JSONRPCMessage } from '@modelcontextprotocol/server';
import { LineFramer, oversizeError, writeMessage, DEFAULT_MAX_MESSAGE_BYTES } from '../shared/framing.js';

export class StdioServerTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  private readonly framer: LineFramer;
  private closed = false;
  private readonly onData = (chunk: Buffer) => this.framer.push(chunk);
  private readonly onEnd = () => void this.close();

  constructor(
    private readonly stdin: Readable = process.stdin,
    private readonly stdout: Writable = process.stdout,
    maxMessageBytes = DEFAULT_MAX_MESSAGE_BYTES,
  ) {
    this.framer = new LineFramer(
      {
        message: (m) => this.onmessage?.(m),
        noise: () => void this.writeError(-32700, 'Parse error: a line on stdin is not JSON'),
        oversize: (bytes, ends) => {
          // A client's answer to one of our requests that is too large fails that request at once.
          if (ends?.kind === 'response') return this.onmessage?.(oversizeError(ends, bytes, maxMessageBytes, 'the client'));
          void this.writeError(-32600, `Request too large: ${bytes} bytes exceeds maxMessageBytes ${maxMessageBytes}`, ends?.id ?? null);
        },
      },
      maxMessageBytes,
    );
  }

  async start(): Promise<void> {
    this.stdin.on('data', this.onData);
    this.stdin.on('end', this.onEnd);
    this.stdin.on('error', (err) => this.onerror?.(err));
  }

  send(message: JSONRPCMessage): Promise<void> {
    if (this.closed) return Promise.resolve();
    // A write error (the client went away) is the stream's 'error' event; the send itself settles.
    return writeMessage(this.stdout, message).catch(() => undefined);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.stdin.off('data', this.onData);
    this.stdin.off('end', this.onEnd);
    this.stdin.pause();
    this.onclose?.();
  }

  private writeError(code: number, message: string, id: string | number | null = null): Promise<void> {
    return this.send({ jsonrpc: '2.0', id, error: { code, message } } as unknown as JSONRPCMessage);
  }
}
