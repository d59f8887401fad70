#!/usr/bin/env bash
# test_serve_load.sh LAMINA SHARED [SECONDS] - serve_load.py against `lamina
# serve` on stories260K: 64 concurrent clients for SECONDS (default 20),
# mixed streaming / non-streaming, some dropping their stream: 0 failed or
# lost requests, every slot free at the end, RSS reported; then SIGTERM must
# end the server with status 0.
. "$(dirname "$0")/lib.sh"
SECONDS_=${3:-20}
need_server
start_server "$SHARED/models/stories260K.gguf" -t 1 -c 2048 -np 4
python3 "$HERE/serve_load.py" "$URL" "$SECONDS_" 64 "$pid"
rc=$?
stop_server || { echo "FAIL: server exit $?"; cat "$tmp/server.log"; rc=1; }
exit $rc
