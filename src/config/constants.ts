/**
 * Plain values of the config contract that the schema shares with code running before zod
 * loads (`upstream/early-spawn.ts`, cold start): nothing here imports anything.
 */

/** Names of our environment every stdio child inherits by default (`broker.env.inherit`; case F19). */
export const DEFAULT_INHERITED_ENV: readonly string[] = [
  'HOME', 'LOGNAME', 'PATH', 'SHELL', 'TERM', 'USER', 'TMPDIR', 'TZ',
  'LANG', 'LANGUAGE', 'LC_ALL', 'LC_CTYPE',
  'HTTP_PROXY', 'HTTPS_PROXY', 'NO_PROXY', 'http_proxy', 'https_proxy', 'no_proxy',
  'NODE_EXTRA_CA_CERTS', 'SSL_CERT_FILE', 'SSL_CERT_DIR', 'REQUESTS_CA_BUNDLE',
  // Windows needs these to start anything at all.
  'SYSTEMROOT', 'SystemRoot', 'COMSPEC', 'PATHEXT', 'WINDIR', 'APPDATA', 'LOCALAPPDATA', 'USERPROFILE', 'TEMP', 'TMP',
];

/** Server keys: `^[A-Za-z0-9][A-Za-z0-9_-]*$`, no `__`, not a reserved prefix. */
export const SERVER_KEY = /^[A-Za-z0-9][A-Za-z0-9_-]*$/;
/** Names reserved for the broker's own tools. */
export const RESERVED_SERVER_NAMES = ['broker', 'estate'] as const;

/** Every field of a stdio server (`stdioServerSchema`, strict; a test keeps the two equal). */
export const STDIO_SERVER_FIELDS: readonly string[] = [
  'type', 'command', 'args', 'env', 'envFile', 'inheritEnv', 'cwd', 'era', 'isolation', 'isolationIdleMs', 'isolationMaxPrincipals',
  'prefix', 'timeoutMs', 'connectTimeoutMs', 'required', 'disabled', 'tools', 'verdictFromText', 'resourcePriority',
];
