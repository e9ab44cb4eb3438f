export { EVERY_PRINCIPAL, type Approval, type EraVerdict, type ObservedTool, type PinState, type Proposal, type SeenTool, type Store, type ToolPin, type BrokerInstance, type TaskRow, type TaskStatus, type TaskStoppedBy, type TaskChange } from './store.js';
export { SqliteStore, STORE_FILE } from './sqlite.js';
export { decodeListCursor, encodeListCursor, listKeyOf, pageOf, type ListKey, type ListPage } from './list-cursor.js';
