export * from './schema.js';
export { loadConfigFile, parseConfig, type LoadedConfig } from './load.js';
