#!/usr/bin/env node
// Compiles servers.schema.json (generated from the zod schema: `npm run schema`) into a standalone
// validator module, config/validate-config.generated.js, for the early start of the stdio
// upstreams (src/upstream/early-spawn.ts), which runs before zod loads. Run by `npm run build`
// before tsc; the output is not committed. It is written as plain JS, to dist/config/ (run) and
// src/config/ (tests, beside its .d.ts for tsc): tsc would re-print it at twice the size.
// Usage: node scripts/config-validator.mjs [out-dir ...] (default: src/config and dist/config)
//
// Three validators, all from the one JSON Schema (ajv 8 standalone code, no run-time import):
// - validateConfig: the whole file, defaults left out (it only checks; ajv would otherwise fill
//   the defaults of every `anyOf` branch it tries into the data);
// - stdioServerDefaults: one stdio server entry, the schema's defaults filled in;
// - brokerDefaults: `{broker}`, the schema's defaults of `broker` filled in.
// Large subschemas are hoisted into definitions, so each is its own function and V8 compiles
// only the ones a file's fields reach (one function for the whole schema: ~45 ms on its first call
// on a busy 2-core machine, against ~3 ms with subschemas of 100 characters or more hoisted).
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Ajv from 'ajv';
import standaloneCode from 'ajv/dist/standalone/index.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const outDirs = process.argv.length > 2 ? process.argv.slice(2) : [join(root, 'src/config'), join(root, 'dist/config')];
/** Subschemas whose JSON is at least this long become a function of their own. */
const HOIST_MIN_CHARS = 100;


/** Keywords whose value is one schema, a map of schemas, or a list of schemas (draft-07). */
const ONE = new Set(['additionalProperties', 'additionalItems', 'items', 'not', 'propertyNames', 'contains', 'if', 'then', 'else']);
const MAP = new Set(['properties', 'patternProperties', 'definitions', 'dependencies']);
const LIST = new Set(['anyOf', 'allOf', 'oneOf']);

/** `schema` with `fn` applied to every subschema, bottom-up (values of `const`, `enum`, `default` are data). */
function mapSchema(s, fn) {
  if (!s || typeof s !== 'object' || Array.isArray(s)) return s;
  const copy = {};
  for (const [k, v] of Object.entries(s)) {
    if (ONE.has(k)) copy[k] = Array.isArray(v) ? v.map((x) => mapSchema(x, fn)) : mapSchema(v, fn);
    else if (MAP.has(k)) copy[k] = Object.fromEntries(Object.entries(v).map(([p, x]) => [p, Array.isArray(x) ? x : mapSchema(x, fn)]));
    else if (LIST.has(k)) copy[k] = v.map((x) => mapSchema(x, fn));
    else copy[k] = v;
  }
  return fn(copy);
}

const withoutDefaults = (s) => mapSchema(s, ({ default: _d, ...rest }) => rest);

/** `s` with its large subschemas moved into `defs` (a `default` stays beside its `$ref`, where ajv reads it). */
function hoisted(s, prefix, defs) {
  let n = 0;
  const top = mapSchema(s, (sub) => {
    for (const key of ['properties', 'patternProperties']) {
      if (sub[key]) sub[key] = Object.fromEntries(Object.entries(sub[key]).map(([p, x]) => [p, ref(x)]));
    }
    for (const key of ['additionalProperties', 'items']) if (sub[key] && typeof sub[key] === 'object' && !Array.isArray(sub[key])) sub[key] = ref(sub[key]);
    for (const key of LIST) if (sub[key]) sub[key] = sub[key].map(ref);
    return sub;
  });
  function ref(sub) {
    if (JSON.stringify(sub).length < HOIST_MIN_CHARS || sub.$ref) return sub;
    const { default: dflt, ...rest } = sub;
    const name = `${prefix}${n++}`;
    defs[name] = rest;
    return dflt === undefined ? { $ref: `defs#/definitions/${name}` } : { $ref: `defs#/definitions/${name}`, default: dflt };
  }
  return top;
}

const { $schema: _draft, ...file } = JSON.parse(readFileSync(join(root, 'servers.schema.json'), 'utf8'));
/** The schema with its local references pointing into the shared definitions (`defs`). */
const schema = mapSchema(file, (s) => (typeof s.$ref === 'string' && s.$ref.startsWith('#/') ? { ...s, $ref: `defs${s.$ref}` } : s));

const stdioServer = schema.properties.mcpServers.additionalProperties.anyOf.find((s) => s.required?.includes('command'));
if (!stdioServer) throw new Error('servers.schema.json: no stdio server schema (an anyOf branch requiring "command")');
const defs = {};
const schemas = {
  validateConfig: hoisted(withoutDefaults(schema), 'c', defs),
  stdioServerDefaults: hoisted(stdioServer, 's', defs),
  brokerDefaults: hoisted({ type: 'object', properties: { broker: schema.properties.broker } }, 'b', defs),
};
// The zod output's own definitions (`#/definitions/…`, a JSON value) join the hoisted ones.
for (const [name, def] of Object.entries(schema.definitions ?? {})) {
  if (JSON.stringify(def).includes('"default"')) throw new Error(`servers.schema.json: definitions.${name} has a default`);
  defs[name] = def;
}
const ajv = new Ajv.default({
  code: { source: true, esm: true, lines: false, optimize: true },
  // Lengths as zod counts them (UTF-16 code units), and no run-time import of ajv's ucs2length.
  unicode: false,
  inlineRefs: false,
  useDefaults: true,
  allErrors: false,
  strict: false,
  logger: false,
  messages: false,
});
ajv.addSchema({ $id: 'defs', definitions: defs });
for (const [id, s] of Object.entries(schemas)) ajv.addSchema({ $id: id, ...s });
const code = standaloneCode.default(ajv, Object.fromEntries(Object.keys(schemas).map((id) => [id, id])));

const header = '// Generated by scripts/config-validator.mjs from servers.schema.json (npm run build). Do not edit.\n';
const types = `${header}
/** Whether \`data\` (a filled-in servers.json) is valid by the JSON Schema; never changes it. */
export declare function validateConfig(data: unknown): boolean;
/** Fills the schema's defaults into one stdio server entry, in place; false when it is not a valid one. */
export declare function stdioServerDefaults(server: unknown): boolean;
/** Fills the schema's defaults of \`broker\` into \`{ broker }\`, in place; false when it is not valid. */
export declare function brokerDefaults(value: { broker?: unknown }): boolean;
`;
for (const dir of outDirs) {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'validate-config.generated.js'), header + code + '\n');
  writeFileSync(join(dir, 'validate-config.generated.d.ts'), types);
}
