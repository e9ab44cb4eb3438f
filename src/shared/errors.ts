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

/** One problem of a config: the JSON path (`mcpServers.fs.command`, or empty) and what is wrong. */
export interface ConfigProblem {
  readonly path: string;
  readonly message: string;
}

/**
 * Thrown for a bad `servers.json`; the CLI answers it with exit code 2 and prints every one of
 * its `problems` on its own line. `path` and `message` are those of the first problem; the
 * message joins all of them with `; `.
 */
export class ConfigError extends BrokerError<{ path: string }> {
  /** Every problem found, in the order found; at least one. */
  readonly problems: readonly ConfigProblem[];

  constructor(path: string, message: string, more: readonly ConfigProblem[] = []) {
    const problems = [{ path, message }, ...more];
    super('config_invalid', problems.map(problemLine).join('; '), { data: { path } });
    this.name = 'ConfigError';
    this.problems = problems;
  }

  /** One error for several problems (at least one). */
  static of(problems: readonly ConfigProblem[]): ConfigError {
    const [first, ...rest] = problems;
    return new ConfigError(first!.path, first!.message, rest);
  }
}

/** `path: message`, or the message alone when there is no path. */
export function problemLine(problem: ConfigProblem): string {
  return problem.path ? `${problem.path}: ${problem.message}` : problem.message;
}

/** A run of white space; one holding a line break is joined into one space by {@link joinLines}. */
const WHITE_RUN = /\s+/g;

/**
 * `text` with each run of white space that holds a line break (`\n`) replaced by one space, other
 * runs kept; not trimmed. Linear in `text`: the global pattern `\s*\n\s*` took seconds on a message of 50,000
 * spaces (each start position re-read the run), and messages come from upstreams and clients.
 */
export function joinLines(text: string): string {
  return text.includes('\n') ? text.replace(WHITE_RUN, (run) => (run.includes('\n') ? ' ' : run)) : text;
}

/** The message of anything thrown, as one line. */
export function messageOf(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  return joinLines(text).trim();
}

/**
 * {@link messageOf}, followed by what the errors in its `cause` chain (up to four deep) add:
 * `fetch failed (connect ECONNREFUSED 127.0.0.1:9)` where Node's fetch says only `fetch failed`.
 * A cause whose message the text already holds adds nothing.
 */
export function messageWithCauses(err: unknown): string {
  const text = messageOf(err);
  const added: string[] = [];
  let cause = err instanceof Error ? err.cause : undefined;
  for (let depth = 0; depth < 4 && cause !== undefined && cause !== null; depth++) {
    const line = messageOf(cause);
    if (line && !text.includes(line) && !added.includes(line)) added.push(line);
    cause = cause instanceof Error ? cause.cause : undefined;
  }
  return added.length ? `${text} (${added.join('; ')})` : text;
}
