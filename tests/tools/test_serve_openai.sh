#!/usr/bin/env bash
# test_serve_openai.sh LAMINA SHARED - the official `openai` npm package (v4)
# against `lamina serve` (serve_openai.cjs). The package is installed into
# ./npm of the working directory (the build folder) on first use; without node,
# npm or the registry the test prints SKIP and passes.
set -u
LAMINA=$1
SHARED=$2
HERE=$(cd "$(dirname "$0")" && pwd)
PREFIX=$PWD/npm
tmp=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

if "$LAMINA" serve --help 2>&1 | grep -q "built without the server"; then
  echo "SKIP: lamina was built without the server"
  exit 0
fi
command -v node >/dev/null || { echo "SKIP: no node"; exit 0; }
if [ ! -f "$PREFIX/node_modules/openai/package.json" ]; then
  command -v npm >/dev/null || { echo "SKIP: no npm"; exit 0; }
  if ! timeout 180 npm install --prefix "$PREFIX" --no-audit --no-fund --loglevel=error openai@4 >"$tmp/npm.log" 2>&1; then
    echo "SKIP: npm install openai@4 failed: $(tail -3 "$tmp/npm.log")"
    exit 0
  fi
fi

KEY=sk-lamina-test
"$LAMINA" serve -m "$SHARED/models/stories260K.gguf" --port 0 -t 1 -c 1024 -np 4 --api-key $KEY 2>"$tmp/server.log" &
pid=$!
for _ in $(seq 200); do
  grep -q "listening on" "$tmp/server.log" && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
URL=$(grep -o 'http://[0-9.]*:[0-9]*' "$tmp/server.log" | head -1)
[ -n "$URL" ] || { cat "$tmp/server.log"; echo "FAIL: server did not start"; exit 1; }

node "$HERE/serve_openai.cjs" "$PREFIX" "$URL" "$KEY"
rc=$?
kill -TERM "$pid"
wait "$pid"
src=$?
pid=
[ $src -eq 0 ] || { echo "FAIL: server exit $src"; rc=1; }
exit $rc
