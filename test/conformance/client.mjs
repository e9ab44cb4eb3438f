#!/usr/bin/env node
// The conformance suite's client-mode command (`conformance client --command "node
// test/conformance/client.mjs" --scenario NAME --spec-version REV`, run by
// scripts/conformance.sh). The suite starts a test server per scenario and runs this with its
// URL as the last argument, the scenario in MCP_CONFORMANCE_SCENARIO, the revision in
// MCP_CONFORMANCE_PROTOCOL_VERSION and scenario data in MCP_CONFORMANCE_CONTEXT.
//
// We put the broker between that test server and a client: the server is the broker's only
// upstream (Streamable HTTP, `prefix: false`), the broker (dist/cli.cjs, so build first) is served
// on stdio to an SDK v2 client that performs the scenario. What the test server grades is then
// what the broker sends upstream. The client's per-scenario steps follow the TypeScript SDK's own
// conformance client (modelcontextprotocol/typescript-sdk, test/conformance/src/everythingClient.ts,
// MIT; the file carries no licence header of its own), adapted: the steps run against the broker,
// and the connect-time `server/discover` shim the SDK's client needs for mocks without discover is
// not used, because it is the broker that negotiates with the upstream.
//
// Exit 0 when the steps ran, 1 when one threw (the suite scores the server's checks either way).
// The broker's stderr goes to ours; records and the data folder go to a temp folder, removed at exit.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const MODERN_REVISIONS = new Set(['2026-07-28']);

/** The scenarios this wrapper knows, each the client's steps against the broker. */
const scenarios = {
  initialize: async (connect) => {
    const client = await connect({ capabilities: {} });
    await client.listTools();
    await client.close();
  },
  tools_call: async (connect) => {
    const client = await connect({ capabilities: {} });
    const { tools } = await client.listTools();
    if (tools.some((t) => t.name === 'add_numbers')) {
      await client.callTool({ name: 'add_numbers', arguments: { a: 5, b: 3 } });
    }
    await client.close();
  },
  'request-metadata': async (connect) => {
    // The broker forwards the calling client's capabilities in the upstream request's _meta, so
    // the client's own set is what the test server sees; a list makes the broker dial upstream.
    const client = await connect({ capabilities: { roots: { listChanged: true }, sampling: {}, elicitation: {} } });
    await client.listTools();
    await client.close();
  },
  'http-standard-headers': async (connect) => {
    const client = await connect({ capabilities: {} });
    const [tool] = upstreamTools((await client.listTools()).tools);
    if (tool) await client.callTool({ name: tool.name, arguments: {} });
    const { resources } = await client.listResources();
    if (resources[0]) await client.readResource({ uri: resources[0].uri });
    const { prompts } = await client.listPrompts();
    if (prompts[0]) await client.getPrompt({ name: prompts[0].name, arguments: {} });
    await client.close();
  },
  'http-custom-headers': async (connect) => {
    const client = await connect({ capabilities: {} });
    await client.listTools();
    for (const call of contextToolCalls()) {
      await client.callTool({ name: call.name, arguments: call.arguments });
    }
    await client.close();
  },
  'http-invalid-tool-headers': async (connect) => {
    // The broker must leave the invalid tools out of its roster: call whatever it advertises.
    const client = await connect({ capabilities: {} });
    for (const tool of upstreamTools((await client.listTools()).tools)) {
      await client.callTool({ name: tool.name, arguments: { region: 'us-west1' } }).catch((error) => {
        process.stderr.write(`conformance client: ${tool.name} refused: ${String(error)}\n`);
      });
    }
    await client.close();
  },
  'json-schema-ref-no-deref': async (connect) => {
    const client = await connect({ capabilities: {} });
    await client.listTools();
    await client.close();
  },
  'json-schema-2020-12-preservation': async (connect) => {
    const client = await connect({ capabilities: {} });
    const { tools } = await client.listTools();
    const focal = tools.find((t) => t.name === 'json_schema_2020_12_tool');
    if (!focal) throw new Error("tool 'json_schema_2020_12_tool' not in the broker's roster");
    await client.callTool({ name: 'json_schema_echo', arguments: { schema: focal.inputSchema } });
    await client.close();
  },
  'sep-2322-client-request-state': async (connect) => {
    const client = await connect({
      capabilities: { elicitation: {} },
      setup: (c) => c.setRequestHandler('elicitation/create', async () => ({ action: 'accept', content: { confirmed: true } })),
    });
    for (const name of ['test_mrtr_echo_state', 'test_mrtr_no_state', 'test_mrtr_unrelated']) {
      await client.callTool({ name, arguments: {} });
    }
    // A result without resultType: the check passes when nobody retries it with inputResponses.
    await client.callTool({ name: 'test_mrtr_no_result_type', arguments: {} }).catch(() => {});
    await client.close();
  },
  'elicitation-sep1034-client-defaults': async (connect) => {
    // A legacy HTTP upstream is offered the broker's configured `http.clientCapabilities` (no
    // single client's initialize decides for a shared connection), so the operator's set says
    // elicitation; the broker re-issues the request to the caller, which declared it too.
    const capabilities = { elicitation: { form: { applyDefaults: true } } };
    const client = await connect({
      capabilities,
      // Empty content: the client SDK fills in the schema's defaults.
      setup: (c) => c.setRequestHandler('elicitation/create', async () => ({ action: 'accept', content: {} })),
      http: { clientCapabilities: capabilities },
    });
    await client.callTool({ name: 'test_client_elicitation_defaults', arguments: {} });
    await client.close();
  },
  'sse-retry': async (connect) => {
    const client = await connect({ capabilities: {} });
    await client.callTool({ name: 'test_reconnection', arguments: {} });
    await client.close();
  },
};

/** The roster less the broker's own tools (`broker__*`, `estate__*`): the test server's tools. */
function upstreamTools(tools) {
  return tools.filter((t) => !/^(broker|estate)__/.test(t.name));
}

/** The `toolCalls` the suite passes in MCP_CONFORMANCE_CONTEXT (`[]` when none). */
function contextToolCalls() {
  const raw = process.env.MCP_CONFORMANCE_CONTEXT;
  return raw ? (JSON.parse(raw).toolCalls ?? []) : [];
}

async function main() {
  const scenario = process.env.MCP_CONFORMANCE_SCENARIO;
  const serverUrl = process.argv[process.argv.length - 1];
  const run = scenario ? scenarios[scenario] : undefined;
  if (!run || !serverUrl || !/^https?:/.test(serverUrl)) {
    process.stderr.write(`usage: MCP_CONFORMANCE_SCENARIO=<one of ${Object.keys(scenarios).join(', ')}> client.mjs <server-url>\n`);
    return 2;
  }
  const revision = process.env.MCP_CONFORMANCE_PROTOCOL_VERSION ?? '2025-11-25';
  // The downstream client's era: the run's, or MCP_BROKER_CONFORMANCE_CALLER (`legacy` or
  // `modern`) to grade the same upstream side behind a caller of the other era.
  const callerEra = process.env.MCP_BROKER_CONFORMANCE_CALLER || (MODERN_REVISIONS.has(revision) ? 'modern' : 'legacy');
  if (callerEra !== 'modern' && callerEra !== 'legacy') {
    process.stderr.write(`MCP_BROKER_CONFORMANCE_CALLER must be legacy or modern (got ${callerEra})\n`);
    return 2;
  }

  const tmp = mkdtempSync(join(tmpdir(), 'mcp-broker-conformance-client-'));
  const config = join(tmp, 'servers.json');
  const open = [];
  try {
    /**
     * Writes the broker's config (the test server as its only upstream) and connects a client
     * of the caller's era to the broker on stdio. `capabilities` are the client's; `setup` may
     * register request handlers before connecting; `http` is the config's `http` section
     * (default: none, so a modern upstream sees only what the calling client declared).
     */
    const connect = async ({ capabilities, setup, http = {} }) => {
      writeFileSync(
        config,
        JSON.stringify({
          mcpServers: { upstream: { type: 'http', url: serverUrl, prefix: false, required: true } },
          http,
          broker: { records: { path: join(tmp, 'calls.ndjson') }, dataDir: join(tmp, 'data') },
        }),
      );
      const client = new Client(
        { name: 'mcp-broker-conformance-client', version: '1.0.0' },
        { capabilities, versionNegotiation: { mode: callerEra === 'modern' ? 'auto' : 'legacy' } },
      );
      setup?.(client);
      await client.connect(
        new StdioClientTransport({
          command: process.execPath,
          args: [join(ROOT, 'dist', 'cli.cjs'), '--config', config, '--log-level', 'warn'],
          stderr: 'inherit',
        }),
      );
      open.push(client);
      return client;
    };
    await run(connect);
    return 0;
  } catch (error) {
    process.stderr.write(`conformance client: ${scenario}: ${error instanceof Error ? error.stack : String(error)}\n`);
    return 1;
  } finally {
    await Promise.allSettled(open.map((c) => c.close()));
    rmSync(tmp, { recursive: true, force: true });
  }
}

process.exitCode = await main();
