#!/usr/bin/env bash
# test_serve_load.sh LAMINA SHARED [SECONDS] - serve_load.py against `lamina
# serve` on stories260K: 64 concurrent clients for SECONDS (default 20),
# mixed streaming / non-streaming, some dropping their stream: 0 failed or
# lost requests, every slot free at the end, RSS reported; then SIGTERM must
# end the server with status 0.
set -u
LAMINA=$1
SHARED=$2
SECONDS_=${3:-20}
HERE=$(cd "$(dirname "$0")" && pwd)
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
"$LAMINA" serve -m "$SHARED/models/stories260K.gguf" --port 0 -t 1 -c 2048 -np 4 2>"$tmp/server.log" &
pid=$!
for _ in $(seq 200); do
  grep -q "listening on" "$tmp/server.log" && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
URL=$(grep -o 'http://[0-9.]*:[0-9]*' "$tmp/server.log" | head -1)
[ -n "$URL" ] || { cat "$tmp/server.log"; echo "FAIL: server did not start"; exit 1; }
python3 "$HERE/serve_load.py" "$URL" "$SECONDS_" 64 "$pid"
rc=$?
kill -TERM "$pid"
wait "$pid"
src=$?
pid=
[ $src -eq 0 ] || { echo "FAIL: server exit $src"; cat "$tmp/server.log"; rc=1; }
exit $rc
