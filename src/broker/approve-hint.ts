/**
 * The `mcp-broker approve` command a refusal names (issue 18 §6: a hint that runs as printed).
 * Toward a privileged caller (`local`, role `operator`: the one who can run it on this host) it
 * is the full command line: this broker's own CLI and config file, absolute and shell-quoted.
 * Toward anyone else it names no host path (issue 12): `mcp-broker approve <tool> …`, for an
 * operator to run.
 */
import { shellQuote } from '../shared/shell-quote.js';

/** Builds the approve command for `tool`, for `principal` when given (`--principal`). */
export type ApproveHint = (tool: string, options: { principal?: string; privileged: boolean }) => string;

/** The command without host paths (no CLI path or config known, or an unprivileged caller). */
export function plainApproveCommand(tool: string, principal?: string): string {
  return `mcp-broker approve ${tool}${principal ? ` --principal ${principal}` : ''}`;
}

/**
 * The hint for a broker started as `node <cliPath> … --config <configFile>`; either may be
 * undefined (built in code), and then the plain command is given.
 */
export function approveHint(cliPath: string | undefined, configFile: string | undefined): ApproveHint {
  return (tool, { principal, privileged }) => {
    if (!privileged || !cliPath) return plainApproveCommand(tool, principal);
    const config = configFile ? ` --config ${shellQuote(configFile)}` : '';
    return `node ${shellQuote(cliPath)} approve ${tool}${config}${principal ? ` --principal ${shellQuote(principal)}` : ''}`;
  };
}
