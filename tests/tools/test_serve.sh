#!/usr/bin/env bash
# test_serve.sh LAMINA SHARED - `lamina serve` over HTTP with curl and
# serve_check.py: routes, streaming == non-streaming, stop, max_tokens, seed,
# n, logprobs, response_format, tokenize round trip, metrics, API key, bad
# input (each a 4xx, the server keeps serving), a slow sender, greedy parallel
# == serial, and a clean exit 0 on SIGTERM with a request in flight.
# The server listens on a free loopback port (--port 0, read from its log).
. "$(dirname "$0")/lib.sh"
M=$SHARED/models/stories260K.gguf

need_server

KEY=test-key-123
start_server "$M" -t 1 -c 2048 -np 4 --api-key $KEY --max-body 65536 --conn-timeout 2
H="Authorization: Bearer $KEY"

# curl basics
curl -sf "$URL/health" | grep -q '"status":"ok"' && ok || bad "health"
curl -sf -H "$H" "$URL/v1/models" | grep -q '"id":"stories260K.gguf"' && ok || bad "models"
out=$(curl -sf -H "$H" "$URL/v1/completions" -d '{"prompt":"Once upon a time","max_tokens":12,"temperature":0}')
echo "$out" | python3 -c 'import json,sys; j=json.load(sys.stdin); assert j["usage"]["completion_tokens"]==12' &&
  ok || bad "completions max_tokens: $out"
curl -sfN -H "$H" "$URL/v1/chat/completions" \
  -d '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":5,"stream":true}' >"$tmp/sse.txt"
tail -c 14 "$tmp/sse.txt" | grep -q '^data: \[DONE\]$' && ok || bad "stream does not end with [DONE]"
code=$(curl -s -o "$tmp/e.json" -w '%{http_code}' "$URL/v1/models")
[ "$code" = 401 ] && grep -q '"error"' "$tmp/e.json" && ok || bad "no key: $code"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "$H" "$URL/nope")
[ "$code" = 404 ] && ok || bad "unknown route: $code"
curl -sf -H "$H" "$URL/metrics" | grep -q '^lamina_slots_total 4$' && ok || bad "metrics"
curl -sf "$URL/" | grep -q '<textarea' && ok || bad "web page"

python3 "$HERE/serve_check.py" "$URL" "$KEY" && ok || bad "serve_check.py"

# SIGTERM with a streaming request in flight: the client gets a complete
# stream, the server exits 0
curl -sN -H "$H" "$URL/v1/completions" \
  -d '{"prompt":"Once upon a time","max_tokens":2000,"stream":true,"ignore_eos":true}' >"$tmp/inflight.txt" &
cpid=$!
sleep 0.5
kill -TERM "$pid"
wait "$pid"
rc=$?
pid=
wait "$cpid"
[ $rc -eq 0 ] && ok || bad "SIGTERM: exit $rc"
grep -q "shutting down" "$tmp/server.log" && ok || bad "no shutdown message"
tail -c 14 "$tmp/inflight.txt" | grep -q '^data: \[DONE\]$' && ok || bad "in-flight stream not ended cleanly"

finish
