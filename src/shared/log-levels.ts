/** Log levels accepted by `--log-level` and `MCP_BROKER_LOG_LEVEL`; default `info`. Loads without pino. */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
