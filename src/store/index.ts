export { EVERY_PRINCIPAL, type Approval, type PinState, type Proposal, type Store, type ToolPin } from './store.js';
export { SqliteStore, STORE_FILE } from './sqlite.js';
