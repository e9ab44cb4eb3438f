/**
 * Live config (issue 18 §5): `servers.json` is reloaded on SIGHUP and, unless `watch` is off,
 * when the file changes (the file is watched, and its folder only while it is away from its path,
 * so an editor's save-by-rename is seen and nothing else in the folder wakes the broker; changes
 * are debounced by {@link WATCH_DEBOUNCE_MS} and a save that leaves the bytes as they were is
 * ignored). A new config that does not load, or that a transport refuses, is logged with its
 * reason and the running one is kept. What applies live and what needs a restart is the
 * gateway's `reload` (gateway.ts).
 *
 * A config that loads but is refused when applied (a REST upstream's OpenAPI file that cannot be
 * read or imported) is tried again when a file it names changes: the OpenAPI files of its REST
 * upstreams are watched the same way (save in place, by rename, deleted and written again) until
 * a reload is applied or a new `servers.json` does not load, so fixing the file that caused the
 * refusal is picked up as an edit of `servers.json` is, without SIGHUP. (Files those documents
 * `$ref` are not watched.)
 */
import { createHash } from 'node:crypto';
import { readFileSync, statSync, watch, type FSWatcher } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import { ConfigError, messageOf } from '../shared/errors.js';
import type { Logger } from '../shared/logger.js';
import type { ConfigDiff } from './diff.js';
import { loadConfigFile, type LoadedConfig } from './load.js';
import { serverKind } from './schema.js';

/** What a reload is applied to: the gateway (`Gateway.reload`), named by shape so config/ imports nothing above it. */
export interface Reloadable {
  /** Applies `next` (already validated); rejects with a {@link ConfigError} when it is refused. */
  reload(next: LoadedConfig): Promise<ConfigDiff>;
}

/** Quiet time after the last change event before the file is read, in ms. */
export const WATCH_DEBOUNCE_MS = 200;

export interface ConfigWatching {
  /** Reloads now (what SIGHUP does); resolves when applied or refused. */
  reload(why: string): Promise<void>;
  close(): void;
}

/**
 * @param options.answers the `${input:id}` values asked for at start (`LoadedConfig.answers`):
 *   every reload fills the same inputs with them (a terminal is not asked again).
 */
export function watchConfig(gateway: Reloadable, options: { file: string; watch: boolean; logger: Logger; watchFs?: WatchFs; answers?: Readonly<Record<string, string>> }): ConfigWatching {
  const file = resolve(options.file);
  const logger = options.logger;
  // A config given as a pipe or device was read once at start; it is never read again.
  const regular = isRegularFile(file);
  /** The watched files (`servers.json`, and the OpenAPI files of a refused config) with their bytes' digest when last read. */
  const digests = new Map<string, string | undefined>([[file, regular ? digestOf(file) : undefined]]);
  let timer: NodeJS.Timeout | undefined;
  /** The watches of the files a refused config names, by path; none while the running config is the last one read. */
  const named = new Map<string, { close(): void }>();
  let closed = false;

  const reload = async (why: string): Promise<void> => {
    if (!regular) {
      logger.warn({ why }, 'config reload skipped: the config is not a regular file (a pipe is read once)');
      return;
    }
    let next;
    try {
      next = loadConfigFile(file, process.env, { answers: options.answers });
    } catch (err) {
      // Every problem named, one line each (like exit 2 at start).
      const problems = err instanceof ConfigError ? err.problems.map((p) => `${p.path}: ${p.message}`) : [messageOf(err)];
      logger.error({ why, problems }, `config reload refused, the running config is kept: ${problems.join('; ')}`);
      // Only an edit of servers.json can mend this one.
      watchNamed([]);
      return;
    }
    // Read before the gateway reads them: a fix saved while it does is still a change.
    const files = namedFiles(next);
    for (const f of files) digests.set(f, digestOf(f));
    try {
      const diff = await gateway.reload(next);
      watchNamed([]);
      logger.info(
        { why, added: diff.added, removed: diff.removed, changed: diff.changed, policyChanged: diff.policyChanged, principalsChanged: diff.principalsChanged },
        'config reloaded',
      );
      if (diff.needsRestart.length) logger.warn({ sections: diff.needsRestart }, `config reloaded; changes to ${diff.needsRestart.join(', ')} apply at the next start`);
    } catch (err) {
      logger.error({ why, err: messageOf(err) }, 'config reload refused, the running config is kept');
      watchNamed(files);
      // A fix saved while the gateway read came before these watches: compared once now.
      if (named.size) changed();
    }
  };

  /** Watches exactly `files` (besides servers.json), each change reloading like an edit of servers.json. */
  const watchNamed = (files: readonly string[]) => {
    for (const [path, watching] of named) {
      if (files.includes(path)) continue;
      watching.close();
      named.delete(path);
      digests.delete(path);
    }
    // After close(), a reload still under way watches nothing.
    if (closed || !options.watch || !regular) return;
    for (const path of files) if (!named.has(path)) named.set(path, watchFile(path, changed, logger, options.watchFs ?? watch));
  };

  const onSighup = () => void reload('SIGHUP');
  process.on('SIGHUP', onSighup);

  const changed = () => {
    if (closed) return;
    clearTimeout(timer);
    timer = setTimeout(() => {
      const edited: string[] = [];
      for (const [path, before] of digests) {
        const digest = digestOf(path);
        // A file away from its path (mid save, or deleted) is no change until it is back.
        if (digest === undefined || digest === before) continue;
        digests.set(path, digest);
        edited.push(path);
      }
      if (!edited.length) return;
      void reload(edited.includes(file) ? 'file changed' : `file changed: ${edited.join(', ')}`);
    }, WATCH_DEBOUNCE_MS);
    timer.unref();
  };
  const watching = options.watch && regular ? watchFile(file, changed, logger, options.watchFs ?? watch) : undefined;

  return {
    reload,
    close() {
      closed = true;
      clearTimeout(timer);
      watching?.close();
      watchNamed([]);
      process.off('SIGHUP', onSighup);
    },
  };
}

/** The files besides itself that `config` has the broker read when applied: its REST upstreams' OpenAPI files (absolute, as load.ts resolves them). */
function namedFiles(config: LoadedConfig): string[] {
  const files = new Set<string>();
  for (const server of Object.values(config.mcpServers)) {
    if (serverKind(server) === 'rest' && 'openapi' in server && typeof server.openapi === 'string') files.add(server.openapi);
  }
  return [...files];
}

/** `fs.watch` as {@link watchFile} uses it (tests count the events it delivers). */
export type WatchFs = (path: string, options: { persistent: boolean }, listener: (event: string, name: string | null) => void) => FSWatcher;

/**
 * Calls `changed` whenever the file at `path` may have changed. The file itself is watched, so
 * nothing else in its folder wakes the broker (a records file or a database beside
 * `servers.json` is written on every call). When it leaves its path (an editor's save by rename,
 * or a delete before the next write), its folder is watched until a file is at the path again,
 * which is then watched in turn. Failures are logged; SIGHUP still reloads.
 */
function watchFile(path: string, changed: () => void, logger: Logger, fsWatch: WatchFs): { close(): void } {
  const name = basename(path);
  let file: FSWatcher | undefined;
  let folder: FSWatcher | undefined;
  let closed = false;
  const warn = (err: unknown) => logger.warn({ err: messageOf(err) }, 'watching the config file failed; SIGHUP still reloads');
  /** Watches the file at the path now; true when there is one. */
  const watchTheFile = (): boolean => {
    try {
      file = fsWatch(path, { persistent: false }, (event) => {
        changed();
        if (event === 'rename') {
          // Moved, replaced or deleted: this watch follows the old file, not the path.
          file?.close();
          file = undefined;
          untilBack();
        }
      });
      file.on('error', warn);
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') warn(err);
      return false;
    }
  };
  /** Watches the folder until a file is at the path again, then watches that file. */
  const untilBack = () => {
    if (closed || folder) return;
    const back = () => {
      if (!isRegularFile(path) || !watchTheFile()) return;
      folder?.close();
      folder = undefined;
      changed();
    };
    try {
      folder = fsWatch(dirname(path), { persistent: false }, (_event, entry) => {
        if (entry === null || entry === name) back();
      });
      folder.on('error', warn);
    } catch (err) {
      warn(err);
      return;
    }
    // The new file may be in place already (a save by rename lands before this runs).
    back();
  };
  if (!watchTheFile()) untilBack();
  return {
    close() {
      closed = true;
      file?.close();
      folder?.close();
    },
  };
}

function isRegularFile(file: string): boolean {
  try {
    return statSync(file).isFile();
  } catch {
    return false;
  }
}

function digestOf(file: string): string | undefined {
  try {
    return createHash('sha256').update(readFileSync(file)).digest('hex');
  } catch {
    return undefined;
  }
}
