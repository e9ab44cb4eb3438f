/**
 * Live config (issue 18 §5): `servers.json` is reloaded on SIGHUP and, unless `watch` is off,
 * when the file changes (its folder is watched, so an editor's save-by-rename is seen; changes
 * are debounced by {@link WATCH_DEBOUNCE_MS} and a save that leaves the bytes as they were is
 * ignored). A new config that does not load, or that a transport refuses, is logged with its
 * reason and the running one is kept. What applies live and what needs a restart is the
 * gateway's `reload` (gateway.ts).
 */
import { createHash } from 'node:crypto';
import { readFileSync, statSync, watch, type FSWatcher } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import { ConfigError, messageOf } from '../shared/errors.js';
import type { Logger } from '../shared/logger.js';
import type { ConfigDiff } from './diff.js';
import { loadConfigFile, type LoadedConfig } from './load.js';

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

export function watchConfig(gateway: Reloadable, options: { file: string; watch: boolean; logger: Logger }): ConfigWatching {
  const file = resolve(options.file);
  const logger = options.logger;
  // A config given as a pipe or device was read once at start; it is never read again.
  const regular = isRegularFile(file);
  let lastDigest = regular ? digestOf(file) : undefined;
  let timer: NodeJS.Timeout | undefined;

  const reload = async (why: string): Promise<void> => {
    if (!regular) {
      logger.warn({ why }, 'config reload skipped: the config is not a regular file (a pipe is read once)');
      return;
    }
    let next;
    try {
      next = loadConfigFile(file);
    } catch (err) {
      // Every problem named, one line each (like exit 2 at start).
      const problems = err instanceof ConfigError ? err.problems.map((p) => `${p.path}: ${p.message}`) : [messageOf(err)];
      logger.error({ why, problems }, `config reload refused, the running config is kept: ${problems.join('; ')}`);
      return;
    }
    try {
      const diff = await gateway.reload(next);
      logger.info(
        { why, added: diff.added, removed: diff.removed, changed: diff.changed, policyChanged: diff.policyChanged, principalsChanged: diff.principalsChanged },
        'config reloaded',
      );
      if (diff.needsRestart.length) logger.warn({ sections: diff.needsRestart }, `config reloaded; changes to ${diff.needsRestart.join(', ')} apply at the next start`);
    } catch (err) {
      logger.error({ why, err: messageOf(err) }, 'config reload refused, the running config is kept');
    }
  };

  const onSighup = () => void reload('SIGHUP');
  process.on('SIGHUP', onSighup);

  let watcher: FSWatcher | undefined;
  if (options.watch && regular) {
    try {
      watcher = watch(dirname(file), { persistent: false }, (_event, name) => {
        if (name !== null && name !== basename(file)) return;
        clearTimeout(timer);
        timer = setTimeout(() => {
          const digest = digestOf(file);
          if (digest === undefined || digest === lastDigest) return;
          lastDigest = digest;
          void reload('file changed');
        }, WATCH_DEBOUNCE_MS);
        timer.unref();
      });
      watcher.on('error', (err) => logger.warn({ err: messageOf(err) }, 'watching the config file failed; SIGHUP still reloads'));
    } catch (err) {
      logger.warn({ err: messageOf(err) }, 'cannot watch the config file; SIGHUP still reloads');
    }
  }

  return {
    reload,
    close() {
      clearTimeout(timer);
      watcher?.close();
      process.off('SIGHUP', onSighup);
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
