/**
 * Serves the SDK's web-standard Streamable HTTP transport on a Node request, in place of the
 * SDK's `StreamableHTTPServerTransport` wrapper, for two costs (issue 6, bench/README.md):
 *
 * - The wrapper builds a new `@hono/node-server` request listener for every request; here one
 *   listener serves every request of every session, and finds its transport and parsed body
 *   through the Node request it was handed.
 * - `@hono/node-server` buffers the start of a response body to give small bodies a
 *   `Content-Length`: when the first chunk is already there (the resumability priming event)
 *   and the second is not, it waits a timer turn (≥ 1 ms) for it. An SSE stream has no length
 *   to find, so event-stream responses are marked `Transfer-Encoding: chunked`, which that
 *   buffering skips: headers and priming event go out at once, each event as it is sent.
 *   Broker http p50 with resumption on: 2.66 → 1.6 ms (bench/README.md).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { getRequestListener, type HttpBindings, type Http2Bindings } from '@hono/node-server';
import type { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';

interface Pending {
  readonly transport: WebStandardStreamableHTTPServerTransport;
  /** The body already parsed by the route (JSON-RPC message or batch), or `undefined` (GET, DELETE). */
  readonly parsedBody: unknown;
}

const pending = new WeakMap<IncomingMessage, Pending>();

const listener = getRequestListener(
  async (request: Request, env: HttpBindings | Http2Bindings) => {
    const context = pending.get(env.incoming as IncomingMessage);
    if (!context) throw new Error('web adapter: request without a transport');
    const response = await context.transport.handleRequest(request, { parsedBody: context.parsedBody });
    if (response.body && response.headers.get('content-type')?.startsWith('text/event-stream')) {
      response.headers.set('transfer-encoding', 'chunked');
    }
    return response;
  },
  // Leave the global Request/Response alone (the SDK's wrapper does the same).
  { overrideGlobalObjects: false },
);

/**
 * Hands `req` to `transport` and writes its answer to `res`; resolves once the answer has been
 * handed to `res` (an SSE stream keeps writing after that, until its last response is sent).
 *
 * @param parsedBody the JSON body the route already parsed; the transport does not read `req` again.
 */
export async function serveWebTransport(
  transport: WebStandardStreamableHTTPServerTransport,
  req: IncomingMessage,
  res: ServerResponse,
  parsedBody: unknown,
): Promise<void> {
  pending.set(req, { transport, parsedBody });
  try {
    await listener(req, res);
  } finally {
    pending.delete(req);
  }
}

