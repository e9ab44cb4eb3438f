/**
 * An upstream's status message (why it is not ready: a child's stderr line, its exit, an error an
 * upstream answered) as a person is shown it on a terminal: the stdio banner and `mcp-broker
 * check`'s table.
 */
import { cut } from '../shared/cut.js';
import { joinLines } from '../shared/errors.js';
import { printable } from '../shared/printable.js';

/** Most characters of an upstream's status message shown on a terminal, counted after scrubbing (`…` marking a cut). */
export const STATUS_MESSAGE_MAX_CHARS = 160;

/**
 * `message` scrubbed whole with `scrub` (the gateway's scrubber, as it is now: a cut through a
 * secret would leave its start unrecognised, and some messages are kept unscrubbed, such as an
 * error an upstream answered to its listing), on one line, cut at {@link STATUS_MESSAGE_MAX_CHARS},
 * and every control, bidi or invisible format character written as an escape ({@link printable}):
 * the upstream chose the text.
 */
export function shownStatusMessage(message: string, scrub: (text: string) => string): string {
  return printable(cut(joinLines(scrub(message)), STATUS_MESSAGE_MAX_CHARS));
}
