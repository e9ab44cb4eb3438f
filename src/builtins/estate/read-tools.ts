/**
 * The estate relay's read tools (issue 4; seed 002_7bce204a86c1c7ba.txt "the reserved `estate`
 * relay"): `estate__list_dir`, `estate__read_file`, `estate__search`, `estate__stat`. Every path
 * goes through {@link EstateScope} (a path leaving `estate.root` is `guard_error`,
 * `estate_scope_escape`); sizes are bounded by `estate.maxBytes` and `estate.maxResults`
 * (defaults in src/config/schema.ts `estateSchema`). All four are read-only (`readOnlyHint`).
 */
import type { Dirent } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { z } from 'zod';
import { defineFunctionTool, type FunctionTool } from '../../router/function-tool.js';
import type { Scrubber } from '../../shared/scrub.js';
import { maskedBytes, maskedText, redactedBytes, scrubMargin, utf8Boundary } from './redacted-bytes.js';
import type { EstateScope } from './scope.js';

export { utf8Boundary };

/** The bounds of the relay (`estate` in servers.json). */
export interface EstateLimits {
  /** Largest read, in bytes; also how much of each file `estate__search` scans. */
  readonly maxBytes: number;
  /** Most search hits, and most `estate__list_dir` entries per page. */
  readonly maxResults: number;
}

/** Most files one `estate__search` opens, so a huge tree cannot stall a call. */
export const SEARCH_MAX_FILES = 10_000;
/** Longest line excerpt in a search hit, in characters. */
const EXCERPT_CHARS = 200;

const READ = { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false } as const;
const pathArg = (what: string) => z.string().describe(`${what}, relative to the estate root, "/"-separated`);

/**
 * `estate__list_dir`, `estate__read_file`, `estate__search`, `estate__stat` over `scope`. What
 * `read_file` returns and what `search` matches is masked with `scrubber` in a window around it
 * (redacted-bytes.ts): no choice of offset, length or query shows or tests part of a secret.
 */
export function readTools(scope: EstateScope, limits: EstateLimits, scrubber: Scrubber): FunctionTool[] {
  const listDir = defineFunctionTool({
    name: 'estate__list_dir',
    title: 'List an estate folder',
    description: `Lists one folder of the estate (names sorted; type file, dir, symlink or other; size of files). At most ${limits.maxResults} entries per call: when "truncated" is true, call again with "offset": nextOffset.`,
    parameters: z.object({
      path: pathArg('The folder').default('.'),
      offset: z.number().int().min(0).default(0).describe('Entries to skip (paging)'),
    }),
    annotations: READ,
    async handler({ path, offset }) {
      const dir = await scope.open(path, 'dir');
      try {
        const all = await scope.list(dir.handle);
        const page = all.slice(offset, offset + limits.maxResults);
        // The size is the one of the `lstat` that list checked against the broker's own files.
        const entries = page.map((d) => {
          const type = typeOf(d);
          const size = d.stats?.size;
          return type !== 'file' || size === undefined ? { name: d.name, type } : { name: d.name, type, size };
        });
        const end = offset + page.length;
        return { path: dir.rel, entries, total: all.length, truncated: end < all.length, ...(end < all.length ? { nextOffset: end } : {}) };
      } finally {
        await dir.handle.close();
      }
    },
  });

  const readFile = defineFunctionTool({
    name: 'estate__read_file',
    title: 'Read an estate file',
    description: `Reads part of one estate file: "length" bytes from "offset" (both in bytes), at most ${limits.maxBytes} bytes per call. Text comes back as UTF-8 (cut at a character boundary), a file with NUL bytes as base64; secrets in it, or running into it, come back as [REDACTED]. When more remains, the result says so and gives the offset to read on from.`,
    parameters: z.object({
      path: pathArg('The file'),
      offset: z.number().int().min(0).default(0).describe('First byte to read'),
      length: z.number().int().min(1).optional().describe(`Bytes to read; default and maximum ${limits.maxBytes}`),
    }),
    annotations: READ,
    async handler({ path, offset, length }) {
      const file = await scope.open(path, 'file');
      const { handle } = file;
      const size = file.stats.size;
      const want = Math.max(0, Math.min(length ?? limits.maxBytes, limits.maxBytes, size - offset));
      // The piece and a margin on each side: a secret reaching into the piece is found whole.
      const margin = want > 0 ? scrubMargin(scrubber) : 0;
      const from = Math.max(0, offset - margin);
      let window: Buffer;
      try {
        const buffer = Buffer.alloc(Math.max(0, Math.min(size, offset + want + margin) - from));
        const { bytesRead } = buffer.length ? await handle.read(buffer, 0, buffer.length, from) : { bytesRead: 0 };
        window = buffer.subarray(0, bytesRead);
      } finally {
        await handle.close();
      }
      const start = Math.min(offset - from, window.length);
      let bytes = window.subarray(start, Math.min(start + want, window.length));
      const binary = bytes.includes(0);
      // Cut before a character cut at the end, unless that leaves nothing: a piece shorter than
      // its one character is given as it is (shown as U+FFFD), so paging always moves on.
      if (!binary && offset + bytes.length < size) bytes = bytes.subarray(0, utf8Boundary(bytes) || bytes.length);
      const end = offset + bytes.length;
      const truncated = end < size;
      const info = {
        path: file.rel,
        offset,
        bytes: bytes.length,
        size,
        encoding: binary ? 'base64' : 'utf8',
        truncated,
        ...(truncated ? { nextOffset: end } : {}),
      };
      const ranges = bytes.length ? redactedBytes(scrubber, window) : [];
      const text = binary ? maskedBytes(window, start, start + bytes.length, ranges).toString('base64') : maskedText(window, start, start + bytes.length, ranges);
      const content: { type: 'text'; text: string }[] = [{ type: 'text', text }];
      if (truncated) {
        content.push({ type: 'text', text: `[estate: truncated: bytes ${offset}-${end} of ${size} returned; read on with offset ${end}]` });
      } else if (offset > size) {
        content.push({ type: 'text', text: `[estate: offset ${offset} is past the end of the file (${size} bytes)]` });
      }
      return { content, structuredContent: info };
    },
  });

  const search = defineFunctionTool({
    name: 'estate__search',
    title: 'Search estate files',
    description: `Finds a literal text in the estate's files below "path" (symlinks are not followed; binary files are skipped; the first ${limits.maxBytes} bytes of each file are scanned). At most ${limits.maxResults} hits. "truncated" is true when hits may be missing: there were more, or a file was longer than ${limits.maxBytes} bytes ("filesCut" counts those).`,
    parameters: z.object({
      query: z.string().min(1).describe('Literal text to find'),
      path: pathArg('The folder to search').default('.'),
      caseSensitive: z.boolean().default(false),
    }),
    annotations: READ,
    async handler({ query, path, caseSensitive }, context) {
      // The broker's own files, found once for the whole walk.
      const reserved = await scope.reservedNow();
      const start = await scope.open(path, 'any', reserved);
      const needle = caseSensitive ? query : query.toLowerCase();
      const hits: { path: string; line: number; text: string }[] = [];
      let truncated = false;
      let filesScanned = 0;
      /** Files longer than maxBytes: only their start was scanned. */
      let filesCut = 0;
      /** Scans one open file; the caller closes it. */
      const scanFile = async (handle: FileHandle, size: number, rel: string) => {
        if (filesScanned >= SEARCH_MAX_FILES) return void (truncated = true);
        filesScanned++;
        // The scanned start and a margin past it, so a secret across its end is found whole;
        // the query is matched in the text masked (a query that starts a secret finds nothing).
        const buffer = Buffer.alloc(Math.min(size, limits.maxBytes + scrubMargin(scrubber)));
        const { bytesRead } = buffer.length ? await handle.read(buffer, 0, buffer.length, 0) : { bytesRead: 0 };
        const window = buffer.subarray(0, bytesRead);
        const scanned = Math.min(window.length, limits.maxBytes);
        if (window.subarray(0, scanned).includes(0)) return;
        if (size > limits.maxBytes) filesCut++;
        const lines = maskedText(window, 0, scanned, redactedBytes(scrubber, window), true).split('\n');
        for (let i = 0; i < lines.length; i++) {
          const line = lines[i]!;
          const at = (caseSensitive ? line : line.toLowerCase()).indexOf(needle);
          if (at < 0) continue;
          if (hits.length >= limits.maxResults) return void (truncated = true);
          hits.push({ path: rel, line: i + 1, text: excerpt(line, at) });
        }
      };
      // Each entry is opened relative to its held folder without following symlinks, so one
      // swapped for a symlink since the listing is skipped, never entered.
      const walk = async (dir: FileHandle, rel: string): Promise<void> => {
        const entries = await scope.list(dir, reserved).catch(() => [] as Dirent[]);
        for (const entry of entries) {
          if (truncated || context.signal.aborted) return;
          const childRel = rel === '.' ? entry.name : `${rel}/${entry.name}`;
          const kind = entry.isDirectory() ? 'dir' : entry.isFile() ? 'file' : undefined;
          if (!kind) continue;
          const child = await scope.openIn(dir, entry.name, kind, reserved);
          if (!child) continue; // vanished, became something else, or the broker's own: not a hit
          try {
            if (kind === 'dir') await walk(child.handle, childRel);
            else await scanFile(child.handle, child.stats.size, childRel);
          } finally {
            await child.handle.close();
          }
        }
      };
      try {
        if (start.stats.isFile()) await scanFile(start.handle, start.stats.size, start.rel);
        else await walk(start.handle, start.rel);
      } finally {
        await start.handle.close();
      }
      return { query, path: start.rel, hits, truncated: truncated || filesCut > 0, filesScanned, filesCut };
    },
  });

  const stat = defineFunctionTool({
    name: 'estate__stat',
    title: 'Describe an estate path',
    description: 'Type (file or dir), size in bytes, last modification time and permission bits of one estate path (symlinks inside the estate are followed).',
    parameters: z.object({ path: pathArg('The path') }),
    annotations: READ,
    async handler({ path }) {
      const found = await scope.open(path, 'any');
      await found.handle.close();
      const s = found.stats;
      return {
        path: found.rel,
        type: s.isDirectory() ? 'dir' : 'file',
        size: s.size,
        modified: s.mtime.toISOString(),
        mode: (s.mode & 0o7777).toString(8).padStart(4, '0'),
      };
    },
  });

  return [listDir, readFile, search, stat];
}

function typeOf(d: Dirent): 'file' | 'dir' | 'symlink' | 'other' {
  if (d.isFile()) return 'file';
  if (d.isDirectory()) return 'dir';
  if (d.isSymbolicLink()) return 'symlink';
  return 'other';
}

function excerpt(line: string, at: number): string {
  if (line.length <= EXCERPT_CHARS) return line;
  const start = Math.max(0, Math.min(at - 40, line.length - EXCERPT_CHARS));
  return `${start > 0 ? '…' : ''}${line.slice(start, start + EXCERPT_CHARS)}…`;
}
