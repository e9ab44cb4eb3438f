/**
 * The environment a stdio upstream is started with (case F19).
 *
 * A child gets the variables named in `broker.env.inherit` (default
 * {@link DEFAULT_INHERITED_ENV}: the login basics, locale, proxy and CA settings) plus the
 * server's own `inheritEnv` names, then its configured `env`, which wins. Nothing else of our
 * environment leaks: a child never sees `process.env` whole.
 */
export const DEFAULT_INHERITED_ENV: readonly string[] = [
  'HOME', 'LOGNAME', 'PATH', 'SHELL', 'TERM', 'USER', 'TMPDIR', 'TZ',
  'LANG', 'LANGUAGE', 'LC_ALL', 'LC_CTYPE',
  'HTTP_PROXY', 'HTTPS_PROXY', 'NO_PROXY', 'http_proxy', 'https_proxy', 'no_proxy',
  'NODE_EXTRA_CA_CERTS', 'SSL_CERT_FILE', 'SSL_CERT_DIR', 'REQUESTS_CA_BUNDLE',
  // Windows needs these to start anything at all.
  'SYSTEMROOT', 'SystemRoot', 'COMSPEC', 'PATHEXT', 'WINDIR', 'APPDATA', 'LOCALAPPDATA', 'USERPROFILE', 'TEMP', 'TMP',
];

/** Builds a child's environment: inherited names present in `source`, then `env` on top. */
export function childEnv(
  inherit: readonly string[],
  env: Readonly<Record<string, string>>,
  source: NodeJS.ProcessEnv = process.env,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of inherit) {
    const value = source[name];
    if (value !== undefined && !value.startsWith('()')) out[name] = value;
  }
  return Object.assign(out, env);
}
