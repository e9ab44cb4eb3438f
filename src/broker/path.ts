/**
 * The order of the call path (seed 002_7bce204a86c1c7ba.txt), outermost first. Stages after
 * `judge` run on the way in; `record` and everything outside it act on the way out, once the
 * inner stages have settled the call.
 */
import type { Stage } from './runner.js';

export interface CallPathStages {
  publish?: Stage;
  record: Stage;
  evaluate?: Stage;
  scrub?: Stage;
  judge: Stage;
  relay?: Stage;
  budget?: Stage;
  breaker?: Stage;
  deadline: Stage;
  retry?: Stage;
  invoke: Stage;
}

/** The stages in the seed's order, as the runner composes them (outermost first). */
export function orderStages(s: CallPathStages): Stage[] {
  return [s.publish, s.record, s.evaluate, s.scrub, s.judge, s.relay, s.budget, s.breaker, s.deadline, s.retry, s.invoke].filter(
    (x): x is Stage => x !== undefined,
  );
}
