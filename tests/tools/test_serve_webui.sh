#!/usr/bin/env bash
# test_serve_webui.sh LAMINA SHARED - the chat page at / in headless Chromium:
# serve_webui.cjs types a message, presses Enter and waits for the streamed
# reply. SKIPs (and passes) without chromium or node.
. "$(dirname "$0")/lib.sh"
cpid=
cleanup() {
  [ -n "$cpid" ] && kill "$cpid" 2>/dev/null && wait "$cpid" 2>/dev/null
  lib_cleanup
}
trap cleanup EXIT
need_server
CHROMIUM=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
[ -n "$CHROMIUM" ] || { echo "SKIP: no chromium (scripts/deps.sh installs it when apt has it)"; exit 0; }
command -v node >/dev/null || { echo "SKIP: no node"; exit 0; }
node --experimental-websocket -e 'process.exit(typeof WebSocket === "function" ? 0 : 1)' 2>/dev/null ||
  { echo "SKIP: node has no WebSocket"; exit 0; }

start_server "$SHARED/models/stories260K.gguf" -t 1 -c 1024 -np 2

"$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update \
  --disable-sync --no-first-run --disable-dev-shm-usage --user-data-dir="$tmp/profile" --remote-debugging-port=0 \
  about:blank 2>"$tmp/chromium.log" &
cpid=$!
WS=
for _ in $(seq 300); do
  WS=$(grep -o 'ws://[^ ]*' "$tmp/chromium.log" | head -1)
  [ -n "$WS" ] && break
  kill -0 "$cpid" 2>/dev/null || break
  sleep 0.1
done
[ -n "$WS" ] || { tail -5 "$tmp/chromium.log"; echo "SKIP: chromium did not start its DevTools endpoint"; exit 0; }

node --experimental-websocket --no-warnings "$HERE/serve_webui.cjs" "$WS" "$URL/"
rc=$?
kill "$cpid" 2>/dev/null
wait "$cpid" 2>/dev/null
cpid=
stop_server || { echo "FAIL: server exit $?"; cat "$tmp/server.log"; rc=1; }
exit $rc
