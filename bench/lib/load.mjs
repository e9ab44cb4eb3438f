/**
 * The load: SDK `Client.callTool` calls against one warm connection, every answer checked
 * (a refusal or a wrong body fails the configuration, it is never counted as fast).
 */

/** 100 bytes of text for the echo calls. */
export const ECHO_TEXT = ('bench echo payload: the quick brown fox jumps over the lazy dog. ' + 'x'.repeat(100)).slice(0, 100);
if (Buffer.byteLength(ECHO_TEXT) !== 100) throw new Error('ECHO_TEXT must be 100 bytes');

function textOf(result) {
  const block = result?.content?.[0];
  return block && block.type === 'text' ? block.text : undefined;
}

async function echoOnce(conn) {
  const result = await conn.client.callTool({ name: conn.tools.echo, arguments: { text: ECHO_TEXT } });
  if (result.isError || textOf(result) !== ECHO_TEXT) {
    throw new Error(`echo answered wrongly: ${JSON.stringify(result).slice(0, 300)}`);
  }
}

async function blobOnce(conn, bytes) {
  const result = await conn.client.callTool({ name: conn.tools.blob, arguments: { bytes } });
  const text = textOf(result);
  if (result.isError || text === undefined || text.length !== bytes) {
    throw new Error(`blob ${bytes} answered wrongly: ${JSON.stringify(result).slice(0, 300)}`);
  }
}

/** `n` sequential echo calls; returns each call's latency in ms. */
export async function sequentialEcho(conn, n) {
  const samples = new Array(n);
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await echoOnce(conn);
    samples[i] = performance.now() - t0;
  }
  return samples;
}

/** `n` echo calls with at most `concurrency` in flight; returns the elapsed ms. */
export async function concurrentEcho(conn, n, concurrency) {
  let issued = 0;
  const t0 = performance.now();
  const worker = async () => {
    while (issued < n) {
      issued++;
      await echoOnce(conn);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, n) }, worker));
  return performance.now() - t0;
}

/** `n` sequential blob calls of `bytes`; returns each call's time in ms. */
export async function sequentialBlob(conn, bytes, n) {
  const samples = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await blobOnce(conn, bytes);
    samples.push(performance.now() - t0);
  }
  return samples;
}

/** Warms the JIT of every process on the path. */
export async function warmUp(conn, { echo = 200, mib = true } = {}) {
  await concurrentEcho(conn, echo, 8);
  if (mib) await blobOnce(conn, 1024 * 1024);
}

/** The `p`-th percentile (0–100) of samples, nearest rank. */
export function percentile(samples, p) {
  if (!samples.length) return undefined;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank];
}
