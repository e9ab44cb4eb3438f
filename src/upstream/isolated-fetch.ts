/**
 * `fetch` for the SDK's HTTP client transports, giving each request its own `AbortSignal`.
 *
 * The SDK's `StreamableHTTPClientTransport` (and `SSEClientTransport`) pass one connection-wide
 * signal to every `fetch`. Node's fetch (undici) adds an `abort` listener to the signal it is
 * given and removes it only once the request is garbage collected, so a busy connection piles
 * up listeners: after 1,500 calls to an HTTP upstream the broker printed a
 * `MaxListenersExceededWarning` line to stderr for every further call (measured on Node 20.20,
 * SDK 1.32.2; the same as nodejs/undici#5285).
 *
 * Here undici gets a signal of the request's own, and the connection's signal reaches it
 * through one listener that is removed as soon as the response is over (its body read to the
 * end, failed or cancelled; at once for a response without a body). Aborting the connection's
 * signal still aborts every request and every body being read, as before.
 */
import { withBody } from '../wire/call-stream-logs.js';

/** Wraps `base` so the connection-wide `init.signal` never collects listeners. */
export function isolatedAbortFetch(base: typeof fetch): typeof fetch {
  return async (input: Parameters<typeof fetch>[0], init?: RequestInit): Promise<Response> => {
    const parent = init?.signal;
    if (!parent || parent.aborted) return base(input, init);
    const own = new AbortController();
    const forward = () => own.abort(parent.reason);
    parent.addEventListener('abort', forward, { once: true });
    const release = () => parent.removeEventListener('abort', forward);
    let response: Response;
    try {
      response = await base(input, { ...init, signal: own.signal });
    } catch (err) {
      release();
      throw err;
    }
    if (!response.body) {
      release();
      return response;
    }
    return withBodyEnd(response, release);
  };
}

/** `response` with a body that calls `done` once, when it ends, fails or is cancelled. */
function withBodyEnd(response: Response, done: () => void): Response {
  const reader = response.body!.getReader();
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done: end, value } = await reader.read();
        if (end) {
          done();
          controller.close();
        } else controller.enqueue(value);
      } catch (err) {
        done();
        controller.error(err);
      }
    },
    cancel(reason) {
      done();
      return reader.cancel(reason);
    },
  });
  return withBody(response, body);
}
