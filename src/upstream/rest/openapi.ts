/**
 * OpenAPI import for rest upstreams (issue 7 §3): `"openapi": "./api.json"` (3.x, a local file)
 * plus an `operations` allowlist of operationIds generates the same {@link RestToolDefinition}s
 * a hand-written `tools` entry does. Parsed, validated and dereferenced by
 * `@apidevtools/swagger-parser` (no HTTP `$ref`s are fetched; circular ones are left as `$ref`).
 *
 * Per operation: path, query and header parameters (path-level ones merged under the
 * operation's own) become arguments; a JSON request body's object properties become `body`
 * arguments (a name already taken by a parameter is advertised as `body_<name>`). The tool's
 * name is the operationId; its description the summary and description; `readOnly` follows the
 * method (GET and HEAD). Cookie parameters are skipped, or refused when required.
 *
 * Errors: a {@link ConfigError} naming `mcpServers.<key>.openapi` (the file cannot be read,
 * parsed or validated, or is not 3.x) or `mcpServers.<key>.operations` (an unknown operationId,
 * or an operation that cannot be served: a required non-JSON body, a header outside
 * `argHeaders`, …). The CLI exits 2 for either.
 */
import { ConfigError, messageOf } from '../../shared/errors.js';
import { definitionProblems, readOnlyByMethod, type HttpMethod, type RestArg, type RestToolDefinition } from '../../config/rest-definition.js';

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head'] as const;

interface Parameter {
  name: string;
  in: string;
  required?: boolean;
  description?: string;
  schema?: Record<string, unknown>;
  content?: Record<string, { schema?: Record<string, unknown> }>;
}

interface Operation {
  operationId?: string;
  summary?: string;
  description?: string;
  parameters?: Parameter[];
  requestBody?: { required?: boolean; content?: Record<string, { schema?: Record<string, unknown> }> };
}

type PathItem = Partial<Record<(typeof METHODS)[number], Operation>> & { parameters?: Parameter[] };

interface OpenApiDocument {
  openapi?: string;
  swagger?: string;
  servers?: Array<{ url: string; variables?: Record<string, { default: string }> }>;
  paths?: Record<string, PathItem>;
}

export interface ImportOptions {
  /** Absolute path of the OpenAPI file (load.ts resolves it against `servers.json`). */
  file: string;
  /** The operationIds to serve. */
  operations: readonly string[];
  /** `mcpServers.<key>`, for error paths. */
  at: string;
  argHeaders: readonly string[];
  /** Names of the server's configured `headers`. */
  configuredHeaders: readonly string[];
}

export interface ImportedApi {
  tools: RestToolDefinition[];
  /** `servers[0].url` with its variables at their defaults; undefined when the file has none. */
  serverUrl?: string;
}

/** Loads the file and builds one definition per allowlisted operation (module doc). */
export async function importOpenApi(options: ImportOptions): Promise<ImportedApi> {
  const { file, at } = options;
  let doc: OpenApiDocument;
  try {
    // Imported here, not at the top: only a config with an OpenAPI file pays its load time (issue 6).
    const { default: SwaggerParser } = await import('@apidevtools/swagger-parser');
    doc = (await SwaggerParser.validate(file, {
      resolve: { http: false },
      dereference: { circular: 'ignore' },
    })) as OpenApiDocument;
  } catch (err) {
    throw new ConfigError(`${at}.openapi`, `cannot load ${file}: ${messageOf(err)}`);
  }
  if (typeof doc.openapi !== 'string' || !doc.openapi.startsWith('3.')) {
    throw new ConfigError(`${at}.openapi`, `${file} is ${doc.swagger ? `Swagger ${doc.swagger}` : 'not OpenAPI'}; only OpenAPI 3.x is supported`);
  }
  const wanted = new Set(options.operations);
  const found = new Map<string, RestToolDefinition>();
  for (const [path, item] of Object.entries(doc.paths ?? {})) {
    for (const method of METHODS) {
      const op = item[method];
      if (!op?.operationId || !wanted.has(op.operationId) || found.has(op.operationId)) continue;
      const def = definitionOf(op.operationId, method.toUpperCase() as HttpMethod, path, item, op, at);
      const problems = definitionProblems(def, options.argHeaders, options.configuredHeaders);
      if (problems.length) {
        const p = problems[0]!;
        throw new ConfigError(`${at}.operations`, `operation "${def.name}" cannot be served: ${p.path.join('.')}: ${p.message}`);
      }
      found.set(op.operationId, def);
    }
  }
  for (const id of options.operations) {
    if (!found.has(id)) throw new ConfigError(`${at}.operations`, `no operation with operationId "${id}" in ${file}`);
  }
  const server = doc.servers?.[0];
  const serverUrl = server?.url.replace(/\{([^}]+)\}/g, (m, v: string) => server.variables?.[v]?.default ?? m);
  return { tools: options.operations.map((id) => found.get(id)!), ...(serverUrl ? { serverUrl } : {}) };
}

function definitionOf(name: string, method: HttpMethod, path: string, item: PathItem, op: Operation, at: string): RestToolDefinition {
  const params = new Map<string, Parameter>();
  for (const p of [...(item.parameters ?? []), ...(op.parameters ?? [])]) params.set(`${p.in}:${p.name}`, p);
  const args: Record<string, RestArg> = {};
  const add = (argName: string, arg: RestArg, fallback: string) => {
    args[Object.hasOwn(args, argName) ? fallback : argName] = arg;
  };
  for (const p of params.values()) {
    if (p.in === 'cookie') {
      if (p.required) throw new ConfigError(`${at}.operations`, `operation "${name}" needs cookie parameter "${p.name}", which rest tools cannot send`);
      continue;
    }
    if (p.in !== 'path' && p.in !== 'query' && p.in !== 'header') continue;
    const schema = p.schema ?? Object.values(p.content ?? {})[0]?.schema ?? { type: 'string' };
    add(p.name, { in: p.in, wireName: p.name, schema, required: p.in === 'path' || p.required === true, ...(p.description ? { description: p.description } : {}) }, `${p.in}_${p.name}`);
  }
  const body = op.requestBody;
  if (body) {
    const media = Object.entries(body.content ?? {}).find(([type]) => type === 'application/json' || type.endsWith('+json'));
    const schema = media?.[1].schema;
    const properties = schema?.properties as Record<string, Record<string, unknown>> | undefined;
    if (!properties) {
      if (body.required) throw new ConfigError(`${at}.operations`, `operation "${name}" needs a request body that is not a JSON object with properties`);
    } else {
      const required = new Set(Array.isArray(schema!.required) ? (schema!.required as string[]) : []);
      for (const [prop, propSchema] of Object.entries(properties)) {
        const description = typeof propSchema.description === 'string' ? propSchema.description : undefined;
        add(prop, { in: 'body', wireName: prop, schema: propSchema, required: required.has(prop), ...(description ? { description } : {}) }, `body_${prop}`);
      }
    }
  }
  return {
    name,
    description: [op.summary, op.description].filter(Boolean).join('\n\n'),
    method,
    path,
    args,
    readOnly: readOnlyByMethod(method),
  };
}
