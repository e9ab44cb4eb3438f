export * from './schema.js';
export { loadConfigFile, loadConfigFileAsking, parseConfig, readConfigFile, type AskInput, type LoadedConfig, type ParseOptions } from './load.js';
export { inputEnvName, type ConfigInput } from './interpolate.js';
export { configJsonSchema } from './json-schema.js';
export { terminalAsker } from './ask.js';
