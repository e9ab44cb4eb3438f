export { NdjsonRecordSink, type RecordSink, type NdjsonSinkOptions, type RecordsFs } from './records.js';
export { acquireRecordsLock, pidIsAlive, type RecordsLock, type RecordsLockDeps } from './records-lock.js';
export { RecordPublisher, type RecordSubscriber } from './publisher.js';
