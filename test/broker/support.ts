/** Builders for broker unit tests: calls, sessions, targets, and a stage that records what reached it. */
import type { CallToolResult, Tool } from '@modelcontextprotocol/server';
import type { Stage } from '../../src/broker/runner.js';
import type { BrokerCall, CallerSession, CallRequest, ToolTarget } from '../../src/broker/types.js';
import { toolHash } from '../../src/upstream/roster.js';

export function session(over: Partial<CallerSession> = {}): CallerSession {
  return { sessionId: 's-1', principal: 'local', unit: 's-1', isLive: () => true, ...over };
}

export function tool(name: string, over: Partial<Tool> = {}): Tool {
  return { name, description: `the ${name} tool`, inputSchema: { type: 'object' }, ...over };
}

export function target(name = 'fx__echo', over: Partial<ToolTarget> & { tool?: Partial<Tool> } = {}): ToolTarget {
  const { tool: toolOver, ...rest } = over;
  const definition = tool(name, toolOver);
  return { name, server: 'fx', toolName: name.replace(/^fx__/, ''), state: 'active', source: 'upstream', definition, hash: toolHash(definition), ...rest };
}

export function call(
  over: { request?: Partial<CallRequest>; session?: CallerSession; target?: ToolTarget; startedAt?: number; readOnly?: boolean } = {},
): BrokerCall {
  const request: CallRequest = { name: over.target?.name ?? 'fx__echo', args: {}, signal: new AbortController().signal, ...over.request };
  return {
    callId: 'c-1',
    request,
    session: over.session ?? session(),
    startedAt: over.startedAt ?? 1_700_000_000_000,
    target: over.target,
    signal: request.signal,
    readOnly: over.readOnly,
    attempts: 0,
    bytesOut: 0,
    notes: {},
  };
}

export function text(t: string, extra: Partial<CallToolResult> = {}): CallToolResult {
  return { content: [{ type: 'text', text: t }], ...extra };
}

/**
 * The innermost stage for tests: counts how often it was reached and settles the call with
 * what `answer` says (an attempt, like invoke: `attempts++`).
 */
export function fakeInvoke(answer: (call: BrokerCall, n: number) => unknown = (c) => {
  c.outcome = 'ok';
  c.result = text('ok');
}): Stage & { reached: number } {
  const stage = {
    name: 'invoke',
    reached: 0,
    async run(c: BrokerCall) {
      stage.reached++;
      c.attempts++;
      c.outcome = undefined;
      c.reason = undefined;
      c.retryable = false;
      await answer(c, stage.reached);
    },
  };
  return stage;
}
