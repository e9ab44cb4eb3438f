export { BrokerError, ConfigError, messageOf, messageWithCauses, problemLine, type ConfigProblem } from './errors.js';
export { type Clock, systemClock, ManualClock } from './clock.js';
export { newCallId, newSessionId } from './ids.js';
export { createLogger, silentLogger, LOG_LEVELS, type Logger } from './logger.js';
export { Scrubber, REDACTED, isCredentialField, CREDENTIAL_FIELD } from './scrub.js';
export { JsonSchemas } from './json-schemas.js';
export { makeFolderSync } from './make-folder.js';
export { callerTrace, traceCarrierOf, traceHeaderFetch, TRACE_FIELDS, upstreamTrace, withCallerTrace, withUpstreamTrace, type TraceCarrier, type TraceField } from './trace-context.js';
