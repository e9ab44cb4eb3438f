/**
 * Serves one downstream client over stdin/stdout (principal `local`), in the era its opening
 * message picks (the SDK's `serveStdio` over our own {@link StdioServerTransport}: `transports/era.ts`):
 * `initialize` (or any message without the 2026-07-28 `_meta` envelope) pins a legacy session;
 * a request carrying the envelope (`server/discover` first, as a negotiating client probes)
 * pins a modern instance, one for the connection, each request its own caller
 * (`session.ts`); every request after the first is refused -32022 when it names a revision not
 * served (`unsupportedRevisionAnswer`, era.ts). Upstreams are dialled as the client's
 * `initialize`, or its first enveloped request, arrives, offered exactly the capabilities it
 * declared; when stdin is a terminal (no client), they are dialled at once so the banner can
 * report them.
 *
 * Kept for both eras: the transport's BOM handling, backpressure and drain (on stdin EOF the
 * requests received are answered, within `broker.drainTimeoutMs`, before `closed` resolves),
 * malformed requests answered with their id (`request-shape.ts`, before the era is decided).
 * A modern `subscriptions/listen` naming `resourceSubscriptions` subscribes the broker upstream
 * for those URIs while it is open (the SDK acknowledges and tags; `subscriptions.ts`); one naming
 * `taskIds` gets the tasks extension's `notifications/tasks` (`task-status-listens.ts`).
 */
import type { Readable, Writable } from 'node:stream';
import type { ClientCapabilities, JSONRPCMessage } from '@modelcontextprotocol/server';
import { serveStdio as serveEras } from '@modelcontextprotocol/server/stdio';
import type { Gateway } from '../gateway.js';
import { ShuttingDown } from '../broker/deadline.js';
import { messageOf } from '../shared/errors.js';
import { StdioEntryLane } from '../wire/stdio-entry-lane.js';
import { envelopeCapabilities, unsupportedRevisionAnswer } from './era.js';
import { guardRequestShapes } from './request-shape.js';
import { DownstreamSession } from './session.js';
import { StdioServerTransport } from './stdio-server.js';
import { ListenSubscriptions } from './subscriptions.js';
import { listenTaskIds, TaskStatusListens } from './task-status-listens.js';

/** After the drain deadline, time for the cancelled calls to be answered and recorded, in ms. */
const DRAIN_GRACE_MS = 3000;

export interface StdioServing {
  /** The instance serving the connection once its era is decided; undefined before. */
  readonly session: () => DownstreamSession | undefined;
  /** Resolves when the transport closes: after stdin EOF, once what was received is answered (or the drain timed out). */
  readonly closed: Promise<void>;
}

export async function serveStdio(
  gateway: Gateway,
  options: { stdin?: Readable; stdout?: Writable; onStartError: (err: unknown) => void; experimental?: Gateway['experimental'] },
): Promise<StdioServing> {
  let onClosed!: () => void;
  const closed = new Promise<void>((resolve) => (onClosed = resolve));
  // The first `initialize`, or the first enveloped request, dials the upstreams (later ones find them started).
  const start = (clientCapabilities: ClientCapabilities) => void gateway.start({ clientCapabilities }).catch(options.onStartError);
  const { maxMessageBytes, drainTimeoutMs, maxPendingOutputBytes } = gateway.config.broker;
  const transport = new StdioServerTransport(options.stdin ?? process.stdin, options.stdout ?? process.stdout, maxMessageBytes, {
    drainTimeoutMs,
    maxPendingOutputBytes,
    // Calls still running at the drain deadline are cancelled, answered and recorded as such.
    onDrainTimeout: () =>
      gateway.broker.drain(DRAIN_GRACE_MS, new ShuttingDown(`stdin closed and broker.drainTimeoutMs (${drainTimeoutMs} ms) passed before the call finished`)),
  });
  let current: DownstreamSession | undefined;
  // A pinned connection's `tools/call` requests skip the entry's pump and channel checks.
  const entryLane = new StdioEntryLane(transport);
  serveEras(
    async ({ era }) => {
      // A modern instance answers `server/discover` with the upstreams' surface (extensions,
      // instructions; upstream/surface.ts): the one remembered for these upstreams, else the one
      // found once the dial its opening request started (below) has settled; judged again on the
      // connection when a reload or a catalog change replaces the policy or the roster (discover-answer.ts).
      if (era === 'modern') await gateway.surfaceKnown();
      // A probe's instance is discarded when the client falls back to `initialize`; the last one built serves.
      current = new DownstreamSession(gateway, {
        principal: 'local',
        era,
        experimental: options.experimental,
        directLane: true,
        entryLane,
        onInitialize: (capabilities) => start(capabilities),
      });
      return current.server;
    },
    { transport, onerror: (err) => gateway.logger.debug({ err: messageOf(err) }, 'stdio serving error') },
  );
  // The entry has taken the transport's callbacks; ours go around them.
  const subscriptions = new ListenSubscriptions(gateway);
  // Task status on a listen (the tasks extension): ours, beside the SDK's router (task-status-listens.ts).
  const send = transport.send.bind(transport);
  const taskListens = new TaskStatusListens(gateway, 'local', (m) => void send(m));
  transport.send = (message) => {
    subscriptions.answered(message);
    const { message: out, written } = taskListens.outbound(message);
    const sent = send(out);
    written?.();
    return sent;
  };
  const entry = transport.onmessage;
  // A listen naming resources before the upstreams are up would find none serving them: it waits
  // for the start to settle, and what arrives after it waits behind it (order kept). A listen
  // naming tasks waits for its ids to be looked up.
  let held: Promise<void> | undefined;
  // Every request after the first is accepted or refused on its own revision (-32022): the SDK's
  // entry checks the ones that open the connection, until one picks the era, and queues the rest
  // meanwhile (a modern instance is built only once the upstreams' surface is known), then none.
  let opened = false;
  // Whether an `initialize` arrived (it starts the dial once its session handles it, after this sees the requests behind it).
  let initializeSeen = false;
  transport.onmessage = (message) => {
    if (opened) {
      const refusal = unsupportedRevisionAnswer(message);
      if (refusal) return void send(refusal).catch(() => undefined);
    } else if (typeof (message as { method?: unknown }).method === 'string' && (message as { id?: unknown }).id !== undefined) {
      opened = true;
    }
    const caps = envelopeCapabilities(message);
    if (caps) start(caps);
    else if ((message as { method?: unknown }).method === 'initialize') initializeSeen = true;
    else if (!initializeSeen && !gateway.startRequested && waitsForInitialize(message)) {
      // A legacy request before `initialize`: the upstreams are dialled with the capabilities it
      // declares, so nothing would answer this until stdin closed. Refused at once instead.
      const { id, method } = message as { id: string | number; method: string };
      // The method is named when it is short (never a caller's long text back).
      const what = method.length <= 64 && /^[\w/.-]+$/.test(method) ? method : 'a request';
      const error = { jsonrpc: '2.0', id, error: { code: -32600, message: `Invalid Request: ${what} before initialize; send initialize first` } };
      return void send(error as unknown as JSONRPCMessage).catch(() => undefined);
    }
    const deliver = () => {
      subscriptions.observe(message);
      taskListens.observe(message);
      entryLane.deliver(message, entry);
    };
    const tasks = listenTaskIds(message) !== undefined;
    if (!held && !tasks && (gateway.readySettled || !namesResources(message))) return deliver();
    const before = held ?? (tasks ? Promise.resolve() : gateway.ready.catch(() => undefined));
    const admitted = tasks ? () => taskListens.admit(message).then((ok) => void (ok && deliver())) : deliver;
    const next: Promise<void> = before.then(admitted).finally(() => {
      if (held === next) held = undefined;
    });
    held = next;
  };
  guardRequestShapes(transport);
  const entryClose = transport.onclose;
  transport.onclose = () => {
    entryLane.wireClose();
    entryClose?.();
    void subscriptions.close();
    taskListens.close();
    onClosed();
  };
  return { session: () => current, closed };
}

/**
 * Whether `message` is a request that would wait for the upstreams' first dial, sent before
 * anything started it: any request with an id but `initialize` and `ping` (answered without the
 * upstreams) and `server/discover` (a modern probe, which carries the envelope that starts it).
 */
function waitsForInitialize(message: unknown): boolean {
  const m = message as { id?: unknown; method?: unknown };
  if (typeof m.method !== 'string' || (typeof m.id !== 'string' && typeof m.id !== 'number')) return false;
  return m.method !== 'initialize' && m.method !== 'ping' && m.method !== 'server/discover';
}

/** Whether `message` is a `subscriptions/listen` with `resourceSubscriptions`. */
function namesResources(message: unknown): boolean {
  const m = message as { method?: unknown; params?: { notifications?: { resourceSubscriptions?: unknown } } } | null;
  return m?.method === 'subscriptions/listen' && Array.isArray(m.params?.notifications?.resourceSubscriptions);
}
