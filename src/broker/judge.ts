/**
 * The judge stage (seed 002 steps 1-3; issue 3 §1). Resolves the tool: a tool that is
 * disabled or gone is `unregistered` with the reason. Policy, run mode, first use and
 * pinning are added by the policy module; `deny` and `ask` never reach an upstream.
 */
import type { Stage } from './runner.js';
import { refuse, type BrokerCall, type ToolTarget } from './types.js';

export interface JudgeDeps {
  /** The registry's view of an advertised name; undefined when never known. */
  resolve(name: string): ToolTarget | undefined;
  /** Whether a target is read-only (annotations or `policy.readOnly`). */
  isReadOnly(target: ToolTarget): boolean;
}

export function judgeStage(deps: JudgeDeps): Stage {
  return {
    name: 'judge',
    async run(call, next) {
      const target = call.target ?? deps.resolve(call.request.name);
      if (!target) return refuse(call, 'unregistered', `no tool named "${call.request.name}"`);
      call.target = target;
      if (target.state === 'disabled') return refuse(call, 'unregistered', `tool "${target.name}" is disabled by configuration`);
      if (target.state === 'gone') return refuse(call, 'unregistered', `tool "${target.name}" is gone: upstream "${target.server}" is not serving it now`);
      call.readOnly = deps.isReadOnly(target);
      await next();
    },
  };
}

export type { BrokerCall };
