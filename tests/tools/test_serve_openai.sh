#!/usr/bin/env bash
# test_serve_openai.sh LAMINA SHARED - the official `openai` npm package (v4)
# against `lamina serve` (serve_openai.cjs). The package is installed into
# ./npm of the working directory (the build folder) on first use; without node,
# npm or the registry the test prints SKIP and passes.
. "$(dirname "$0")/lib.sh"
PREFIX=$PWD/npm

need_server
command -v node >/dev/null || { echo "SKIP: no node"; exit 0; }
if [ ! -f "$PREFIX/node_modules/openai/package.json" ]; then
  command -v npm >/dev/null || { echo "SKIP: no npm"; exit 0; }
  if ! timeout 180 npm install --prefix "$PREFIX" --no-audit --no-fund --loglevel=error openai@4 >"$tmp/npm.log" 2>&1; then
    echo "SKIP: npm install openai@4 failed: $(tail -3 "$tmp/npm.log")"
    exit 0
  fi
fi

KEY=sk-lamina-test
start_server "$SHARED/models/stories260K.gguf" -t 1 -c 1024 -np 4 --api-key $KEY

node "$HERE/serve_openai.cjs" "$PREFIX" "$URL" "$KEY"
rc=$?
stop_server || { echo "FAIL: server exit $?"; cat "$tmp/server.log"; rc=1; }
exit $rc
