/**
 * Reading the records back: which files hold them and how a `since` is written. Shared by
 * `mcp-broker calls` and `GET /api/v1/calls`, so both read the same files the same way.
 */
import { createReadStream, existsSync } from 'node:fs';
import { createInterface } from 'node:readline';

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/**
 * A `since` as ms since the epoch: an ISO-8601 time (`2026-11-30T02:00:00Z`), or a duration
 * back from `now` (`500ms`, `90s`, `15m`, `2h`, `7d`, `1w`). Undefined when unreadable.
 */
export function parseSince(text: string, now: number): number | undefined {
  const duration = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)$/.exec(text.trim());
  if (duration) return now - Number(duration[1]) * UNIT_MS[duration[2]!]!;
  if (!/^\d{4}-\d{2}-\d{2}/.test(text.trim())) return undefined;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : at;
}

/** The records files that exist, oldest first: `<path>.N` … `<path>.1`, then `<path>`. */
export function recordFiles(path: string, maxFiles: number): string[] {
  const files: string[] = [];
  for (let i = maxFiles; i >= 1; i--) if (existsSync(`${path}.${i}`)) files.push(`${path}.${i}`);
  if (existsSync(path)) files.push(path);
  return files;
}

/**
 * Every record in `files`, in order, read line by line (memory bounded by one line). Blank lines
 * and a torn last line (a write in progress, or a crash) are skipped.
 */
export async function* readRecords<T = Record<string, unknown>>(files: readonly string[]): AsyncGenerator<T> {
  for (const file of files) {
    const lines = createInterface({ input: createReadStream(file, 'utf8'), crlfDelay: Infinity });
    for await (const line of lines) {
      if (!line.trim()) continue;
      let record: T;
      try {
        record = JSON.parse(line) as T;
      } catch {
        continue;
      }
      yield record;
    }
  }
}
