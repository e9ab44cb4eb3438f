/**
 * The publish stage (seed 002_7bce204a86c1c7ba.txt step 9; issue 3 §9): the outermost stage.
 * Once the record stage has written a call's record, hands it to every in-process subscriber
 * ({@link RecordPublisher}) and sends it to the calling session as an MCP
 * `notifications/message` at level `debug` with logger `mcp-broker` (the session sends it only
 * when it set `logging/setLevel` to `debug`). Nothing here can reach the call: a subscriber's
 * error or a failed notification is logged and dropped. A call with no written record publishes
 * nothing.
 */
import type { RecordPublisher } from '../audit/publisher.js';
import { messageOf } from '../shared/errors.js';
import type { Logger } from '../shared/logger.js';
import { splitStage, type Stage } from './runner.js';
import type { CallRecord } from './types.js';

export interface PublishDeps {
  publisher: RecordPublisher<CallRecord>;
  logger?: Logger;
}

export function publishStage(deps: PublishDeps): Stage {
  return splitStage(
    'publish',
    () => true,
    (call) => {
      const record = call.record;
      if (!record) return;
      try {
        deps.publisher.publish(record);
      } catch (err) {
        deps.logger?.warn({ callId: call.callId, err: messageOf(err) }, 'record publication failed');
      }
      try {
        call.session.log?.('debug', record);
      } catch (err) {
        deps.logger?.debug({ callId: call.callId, err: messageOf(err) }, 'record notification failed');
      }
    },
  );
}
