/**
 * The one error type of mcp-broker. Callers match on `code`, never on the message.
 * Messages are one line, name the upstream or tool, and never carry argument values,
 * headers or tokens.
 */
export class BrokerError<Data = unknown> extends Error {
  /** A stable, machine-matchable code such as `config_invalid` or `upstream_closed`. */
  readonly code: string;
  /** Typed details for the code; never secrets. */
  readonly data: Data | undefined;

  constructor(code: string, message: string, options: { cause?: unknown; data?: Data } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'BrokerError';
    this.code = code;
    this.data = options.data;
  }
}

/** Thrown for a bad `servers.json`; the CLI answers it with exit code 2. */
export class ConfigError extends BrokerError<{ path: string }> {
  constructor(path: string, message: string) {
    super('config_invalid', path ? `${path}: ${message}` : message, { data: { path } });
    this.name = 'ConfigError';
  }
}

/** The message of anything thrown, as one line. */
export function messageOf(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  return text.replace(/\s*\n\s*/g, ' ').trim();
}
