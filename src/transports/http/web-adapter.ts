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
import type { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/server';

/** Serves one web request: a session's transport (legacy) or the modern handler. */
type WebServe = (request: Request) => Promise<Response>;

const pending = new WeakMap<IncomingMessage, WebServe>();

const listener = getRequestListener(
  async (request: Request, env: HttpBindings | Http2Bindings) => {
    const serve = pending.get(env.incoming as IncomingMessage);
    if (!serve) throw new Error('web adapter: request without a transport');
    const response = await serve(request);
    // Only where chunking is allowed: an HTTP/1.0 client gets the body unframed, as before.
    const chunkable = (env.outgoing as ServerResponse).useChunkedEncodingByDefault === true;
    if (chunkable && response.body && response.headers.get('content-type')?.startsWith('text/event-stream')) {
      response.headers.set('transfer-encoding', 'chunked');
    }
    return response;
  },
  // Leave the global Request/Response alone (the SDK's wrapper does the same).
  { overrideGlobalObjects: false },
);

/**
 * Hands `req` to `transport` and writes its answer to `res`; resolves once the answer is
 * written in full (for an SSE stream: once the stream closes, after its last response).
 *
 * @param parsedBody the JSON body the route already parsed; the transport does not read `req` again.
 */
export async function serveWebTransport(
  transport: WebStandardStreamableHTTPServerTransport,
  req: IncomingMessage,
  res: ServerResponse,
  parsedBody: unknown,
): Promise<void> {
  return serveWeb((request) => transport.handleRequest(request, { parsedBody }), req, res);
}

/**
 * Hands `req`, as a web `Request` (its `signal` aborts when the client goes away), to `serve`
 * and writes its `Response` to `res`; resolves once the answer is written in full.
 */
export async function serveWeb(serve: WebServe, req: IncomingMessage, res: ServerResponse): Promise<void> {
  pending.set(req, serve);
  try {
    await listener(req, res);
  } finally {
    pending.delete(req);
  }
}

