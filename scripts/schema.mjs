#!/usr/bin/env node
// Writes servers.schema.json (the JSON Schema of servers.json) from the zod schema in dist/.
// Run by `npm run schema` after a build; test/unit/json-schema.test.ts keeps the file current.
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { configJsonSchema } from '../dist/config/json-schema.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
writeFileSync(join(root, 'servers.schema.json'), JSON.stringify(configJsonSchema(), null, 2) + '\n');
