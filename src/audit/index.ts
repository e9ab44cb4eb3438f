export { NdjsonRecordSink, type RecordSink, type NdjsonSinkOptions } from './records.js';
export { RecordPublisher, type RecordSubscriber } from './publisher.js';
