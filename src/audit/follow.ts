/**
 * Following the records file as it grows (`mcp-broker calls --follow`): every complete line
 * appended after `offset` is handed on, in order. A rotation (the path now names another file)
 * or a truncation starts again at the new file's beginning; a torn last line waits until its
 * newline arrives; a line that is not JSON is skipped, as `readRecords` does.
 */
import { closeSync, openSync, readSync, statSync } from 'node:fs';

/** How often the file is looked at, in ms. */
export const FOLLOW_POLL_MS = 200;

export interface FollowOptions {
  /** Where to start, in bytes; default the file's size now (only what is appended). */
  offset?: number;
  /** Ends the follow; the returned promise then resolves. */
  signal: AbortSignal;
  pollMs?: number;
}

/** Calls `onRecord` for each record appended to `path` until `signal` aborts. */
export async function followRecords<T>(path: string, onRecord: (record: T) => void, options: FollowOptions): Promise<void> {
  let identity = fileIdentity(path);
  let offset = options.offset ?? identity?.size ?? 0;
  let pending = '';
  const pollMs = options.pollMs ?? FOLLOW_POLL_MS;
  while (!options.signal.aborted) {
    const now = fileIdentity(path);
    if (now && (!identity || now.ino !== identity.ino || now.dev !== identity.dev || now.size < offset)) {
      offset = 0; // rotated, replaced or truncated: the new file from its start
      pending = '';
    }
    identity = now;
    if (now && now.size > offset) {
      const chunk = readFrom(path, offset, now.size - offset);
      offset += chunk.length;
      const lines = (pending + chunk.toString('utf8')).split('\n');
      pending = lines.pop()!;
      for (const line of lines) {
        if (!line.trim()) continue;
        let record: T;
        try {
          record = JSON.parse(line) as T;
        } catch {
          continue;
        }
        onRecord(record);
      }
    }
    await new Promise<void>((resolve) => {
      const stop = () => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        options.signal.removeEventListener('abort', stop);
        resolve();
      }, pollMs);
      options.signal.addEventListener('abort', stop, { once: true });
    });
  }
}

function fileIdentity(path: string): { dev: number; ino: number; size: number } | undefined {
  try {
    const st = statSync(path);
    return st.isFile() ? { dev: st.dev, ino: st.ino, size: st.size } : undefined;
  } catch {
    return undefined;
  }
}

function readFrom(path: string, position: number, length: number): Buffer {
  const fd = openSync(path, 'r');
  try {
    const buf = Buffer.alloc(length);
    const n = readSync(fd, buf, 0, length, position);
    return buf.subarray(0, n);
  } finally {
    closeSync(fd);
  }
}
