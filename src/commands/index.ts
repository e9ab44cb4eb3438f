export { callsCommand, formatTable, parseSince, recordFiles, DEFAULT_CALLS_LIMIT, type CallsOptions } from './calls.js';
export { approveCommand, revokeCommand, type DecisionOptions } from './approve.js';
export { processIo, EXIT_OK, EXIT_USAGE, type CommandIo } from './io.js';
export { checkCommand, checkRows, formatCheckTable, EXIT_NOT_READY, type CheckOptions, type CheckRow } from './check.js';
export { approvalsListCommand, approvalsDecideCommand, inboxRow, type ApprovalsOptions } from './approvals.js';
export { shownStatusMessage, STATUS_MESSAGE_MAX_CHARS } from './shown-status-message.js';
