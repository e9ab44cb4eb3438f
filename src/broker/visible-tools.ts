/**
 * What `tools/list` shows one principal (issue 18 §4): every tool of the roster except those the
 * policy would refuse it `denied` whatever happens next (a deny rule or default, the run mode, a
 * shared-state tool it may not use), judged by the same {@link decide} the call path uses; each
 * listed tool with its configured `description`, `title` and `annotations` laid over it. A call
 * to a hidden tool is still judged and refused `denied`, never run.
 */
import type { Tool } from '@modelcontextprotocol/server';
import { decide, type CompiledPolicy } from './policy.js';
import type { ToolTarget } from './types.js';

export interface VisibleToolsDeps {
  policy: CompiledPolicy;
  /** The registry's view of an advertised name (`ToolRouter.resolve`). */
  resolve(name: string): ToolTarget | undefined;
  /** Whether a target counts as read-only (the gateway's `isReadOnly`). */
  isReadOnly(target: ToolTarget): boolean;
  /** Whether a principal is privileged (`isPrivilegedPrincipal`). */
  isPrivileged(principal: string): boolean;
  /** `tool` as configured to be presented (the server's per-tool settings); default as is. */
  present?(tool: Tool, target: ToolTarget): Tool;
}

/** The tools of `tools` that `principal` may see, presented as configured. */
export function visibleTools(tools: readonly Tool[], principal: string, deps: VisibleToolsDeps): Tool[] {
  const out: Tool[] = [];
  const privileged = deps.isPrivileged(principal);
  for (const tool of tools) {
    const target = deps.resolve(tool.name);
    if (!target) continue;
    const verdict = decide(deps.policy, {
      name: tool.name,
      principal,
      readOnly: deps.isReadOnly(target),
      pin: 'same',
      firstUseDone: true,
      toolDefault: target.policyDefault,
      requiresPrivilege: target.requiresPrivilege === true,
      privileged,
    });
    if (verdict.kind === 'refuse') continue;
    out.push(deps.present ? deps.present(tool, target) : tool);
  }
  return out;
}
