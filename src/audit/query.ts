/**
 * Reading the records back: which files hold them, how a `since` is written, and which of them
 * a query keeps in what order. Shared by `mcp-broker calls` and `GET /api/v1/calls`, so both
 * read the same files the same way.
 */
import { createReadStream, statSync } from 'node:fs';

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

/**
 * The records files that exist as regular files, oldest first: `<path>.N` … `<path>.1`, then
 * `<path>` (a folder put at the path holds no records).
 */
export function recordFiles(path: string, maxFiles: number): string[] {
  const files: string[] = [];
  for (let i = maxFiles; i >= 1; i--) if (isFile(`${path}.${i}`)) files.push(`${path}.${i}`);
  if (isFile(path)) files.push(path);
  return files;
}

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/**
 * The lines of a records file as the writer ends them: at `\n` only. Not `node:readline`, which
 * on Node 24 also ends a line at U+2028 and U+2029 (Node 20 does not): JSON leaves both raw in a
 * string, so a record whose tool name (a caller's choice) held one was split in pieces that do not
 * parse and skipped, hidden from `calls` and `GET /api/v1/calls`. Memory bounded by one line.
 */
async function* jsonLines(input: AsyncIterable<string>): AsyncGenerator<string> {
  // The pieces of a line that spans chunks, joined once at its end: each chunk is scanned once.
  let pending: string[] = [];
  for await (const chunk of input) {
    let start = 0;
    for (let end = chunk.indexOf('\n'); end !== -1; end = chunk.indexOf('\n', start)) {
      pending.push(chunk.slice(start, end));
      yield pending.join('');
      pending = [];
      start = end + 1;
    }
    if (start < chunk.length) pending.push(chunk.slice(start));
  }
  if (pending.length > 0) yield pending.join('');
}

/**
 * Every record in `files`, in order, read line by line (memory bounded by one line). Blank lines,
 * torn lines (a write cut short by a full disk or a crash) and lines that are not a JSON object
 * are skipped; so is a file that went away or became unreadable before it was opened (rotated
 * meanwhile).
 */
export async function* readRecords<T = Record<string, unknown>>(files: readonly string[]): AsyncGenerator<T> {
  for (const file of files) {
    const input = createReadStream(file, 'utf8');
    const opened = await new Promise<boolean>((resolve) => {
      input.once('ready', () => resolve(true));
      input.once('error', () => resolve(false));
    });
    if (!opened) {
      input.destroy();
      continue;
    }
    for await (const line of jsonLines(input)) {
      if (!line.trim()) continue;
      let record: unknown;
      try {
        record = JSON.parse(line);
      } catch {
        continue;
      }
      if (record !== null && typeof record === 'object' && !Array.isArray(record)) yield record as T;
    }
  }
}

/**
 * The newest of the records given, by the time their calls started (`ts`), at most `limit` of
 * them (0: all), handed back oldest first. A record is written when its call settles, so the
 * files are in the order calls ended, not started: a call parked on an approval for an hour is
 * written after calls that started long after it. Records with the same `ts` keep the order they
 * were given in; a `ts` that is no time counts as older than any. Memory is bounded by `limit`
 * (with 0, by the records given); each {@link add} costs O(log limit) to place the record and
 * at worst O(limit) to move the others, little when records come nearly in order.
 */
export class NewestRecords<T extends { readonly ts: string }> {
  private readonly kept: { readonly at: number; readonly record: T }[] = [];

  constructor(private readonly limit: number) {}

  /** Offers one record, in the order the files hold them. */
  add(record: T): void {
    const parsed = Date.parse(record.ts);
    const at = Number.isNaN(parsed) ? -Infinity : parsed;
    const kept = this.kept;
    if (this.limit === 0 || kept.length === 0 || at >= kept[kept.length - 1]!.at) {
      kept.push({ at, record });
    } else {
      // After every record not newer than it: ties stay in the order given.
      let lo = 0;
      let hi = kept.length;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (kept[mid]!.at <= at) lo = mid + 1;
        else hi = mid;
      }
      if (lo === 0 && kept.length >= this.limit) return; // older than every record kept
      kept.splice(lo, 0, { at, record });
    }
    if (this.limit > 0 && kept.length > this.limit) kept.shift();
  }

  /** The records kept, oldest first (by `ts`, ties in the order given). */
  records(): T[] {
    const kept = this.limit === 0 ? [...this.kept].sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : 0)) : this.kept;
    return kept.map((k) => k.record);
  }
}
