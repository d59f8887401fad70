# lib.sh - sourced by tests/tools/test_*.sh (each called as `test_X.sh LAMINA
# SHARED`): sets LAMINA, SHARED, HERE (this folder) and tmp (a scratch folder
# removed at exit, together with a server start_server left running); counts
# checks with ok / bad; `finish` prints the count and is the script's status.
set -u
LAMINA=$1
SHARED=$2
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tmp=$(mktemp -d)
pid=
lib_cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$tmp"
}
trap lib_cleanup EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
finish() {
  echo "$pass passed, $fail failed"
  [ $fail -eq 0 ]
}

# The server tests pass (SKIP) when lamina was built without the server.
need_server() {
  if "$LAMINA" serve --help 2>&1 | grep -q "built without the server"; then
    echo "SKIP: lamina was built without the server"
    exit 0
  fi
}

# start_server MODEL ARGS...: `lamina serve` on a free loopback port (--port 0,
# read from its log in $tmp/server.log); sets pid and URL, or fails the test.
start_server() {
  local model=$1
  shift
  "$LAMINA" serve -m "$model" --port 0 "$@" 2>"$tmp/server.log" &
  pid=$!
  for _ in $(seq 200); do
    grep -q "listening on" "$tmp/server.log" && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  URL=$(grep -o 'http://[0-9.]*:[0-9]*' "$tmp/server.log" | head -1)
  [ -n "$URL" ] || { cat "$tmp/server.log" >&2; echo "FAIL: server did not start" >&2; exit 1; }
}

# stop_server: SIGTERM, wait; returns the server's exit status.
stop_server() {
  kill -TERM "$pid"
  wait "$pid"
  local s=$?
  pid=
  return $s
}
