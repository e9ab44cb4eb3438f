/**
 * Serves one downstream client over stdin/stdout (principal `local`). Upstreams are dialled as
 * the client's `initialize` arrives, offered exactly the capabilities it declared; when stdin
 * is a terminal (no client), they are dialled at once so the banner can report them.
 */
import type { Readable, Writable } from 'node:stream';
import type { Gateway } from '../gateway.js';
import { DownstreamSession } from './session.js';
import { StdioServerTransport } from './stdio-server.js';

export interface StdioServing {
  readonly session: DownstreamSession;
  /** Resolves when stdin ends or the transport closes. */
  readonly closed: Promise<void>;
}

export async function serveStdio(
  gateway: Gateway,
  options: { stdin?: Readable; stdout?: Writable; onStartError: (err: unknown) => void; experimental?: Gateway['experimental'] },
): Promise<StdioServing> {
  let onClosed!: () => void;
  const closed = new Promise<void>((resolve) => (onClosed = resolve));
  const session = new DownstreamSession(gateway, {
    principal: 'local',
    experimental: options.experimental,
    onInitialize: (capabilities) => void gateway.start({ clientCapabilities: capabilities }).catch(options.onStartError),
  });
  const transport = new StdioServerTransport(options.stdin ?? process.stdin, options.stdout ?? process.stdout, gateway.config.broker.maxMessageBytes);
  await session.connect(transport);
  const previous = session.server.onclose;
  session.server.onclose = () => {
    previous?.();
    onClosed();
  };
  return { session, closed };
}
