/**
 * Serves one downstream client over stdin/stdout (principal `local`). Upstreams are dialled as
 * the client's `initialize` arrives, offered exactly the capabilities it declared; when stdin
 * is a terminal (no client), they are dialled at once so the banner can report them.
 * On stdin EOF the requests received are answered, within `broker.drainTimeoutMs`, before
 * `closed` resolves (`StdioServerTransport`).
 */
import type { Readable, Writable } from 'node:stream';
import type { Gateway } from '../gateway.js';
import { ShuttingDown } from '../broker/deadline.js';
import { DownstreamSession } from './session.js';
import { StdioServerTransport } from './stdio-server.js';

/** After the drain deadline, time for the cancelled calls to be answered and recorded, in ms. */
const DRAIN_GRACE_MS = 3000;

export interface StdioServing {
  readonly session: DownstreamSession;
  /** Resolves when the transport closes: after stdin EOF, once what was received is answered (or the drain timed out). */
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
  const { maxMessageBytes, drainTimeoutMs, maxPendingOutputBytes } = gateway.config.broker;
  const transport = new StdioServerTransport(options.stdin ?? process.stdin, options.stdout ?? process.stdout, maxMessageBytes, {
    drainTimeoutMs,
    maxPendingOutputBytes,
    // Calls still running at the drain deadline are cancelled, answered and recorded as such.
    onDrainTimeout: () =>
      gateway.broker.drain(DRAIN_GRACE_MS, new ShuttingDown(`stdin closed and broker.drainTimeoutMs (${drainTimeoutMs} ms) passed before the call finished`)),
  });
  await session.connect(transport);
  const previous = session.server.onclose;
  session.server.onclose = () => {
    previous?.();
    onClosed();
  };
  return { session, closed };
}
