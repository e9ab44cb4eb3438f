/** The package version, for `serverInfo`, `clientInfo` and `--version` (read from package.json). */
import { readFileSync } from 'node:fs';

export const VERSION: string = (() => {
  try {
    return JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version as string;
  } catch {
    return '0.0.0';
  }
})();
