/**
 * Asks for a `${input:id}` on a terminal (VS Code asks in its own UI). Only for a process whose
 * stdin is a terminal: over stdio, stdin is the protocol, so the CLI asks only when it is a TTY.
 */
import { createInterface } from 'node:readline';
import { ConfigError } from '../shared/errors.js';
import type { ConfigInput } from './interpolate.js';
import { inputEnvName } from './interpolate.js';

/**
 * An asker reading one line from `input` per question, the prompt (`description (id): `) on
 * `output`; a `password` input is read without echo. Ctrl-C or end of input rejects with a
 * {@link ConfigError} naming the input and its environment variable.
 */
export function terminalAsker(input: NodeJS.ReadableStream = process.stdin, output: NodeJS.WritableStream = process.stderr): (ask: ConfigInput) => Promise<string> {
  return (ask) =>
    new Promise((resolve, reject) => {
      const rl = createInterface({ input, output, terminal: true });
      // readline echoes through this method; muting it hides a password as it is typed.
      const echo = rl as unknown as { _writeToOutput(text: string): void };
      const write = echo._writeToOutput.bind(rl);
      let muted = false;
      echo._writeToOutput = (text) => {
        if (!muted) write(text);
      };
      let answered = false;
      const refuse = () => {
        if (answered) return;
        answered = true;
        rl.close();
        reject(new ConfigError('inputs', `input "${ask.id}" was not given: set ${inputEnvName(ask.id)}, or answer the prompt`));
      };
      rl.on('SIGINT', refuse);
      rl.on('close', refuse);
      const hint = ask.default !== undefined && !ask.password ? ` [${ask.default}]` : '';
      rl.question(`${ask.description ?? ask.id} (${ask.id})${hint}: `, (answer) => {
        answered = true;
        if (muted) output.write('\n');
        rl.close();
        resolve(answer === '' && ask.default !== undefined ? ask.default : answer);
      });
      muted = ask.password === true;
    });
}
