export { ToolRouter, type LocalTool } from './router.js';
