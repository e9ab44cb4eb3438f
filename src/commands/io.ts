/** Where a command writes: stdout for its answer, stderr for problems. Commands never exit; `cli-main.ts` does. */
export interface CommandIo {
  readonly stdout: { write(text: string): unknown };
  readonly stderr: { write(text: string): unknown };
}

/** The process's own streams. */
export const processIo: CommandIo = { stdout: process.stdout, stderr: process.stderr };

/** Exit code of a command that did its job. */
export const EXIT_OK = 0;
/** Exit code of bad options or config (DESIGN.md "Contract"). */
export const EXIT_USAGE = 2;
