#!/usr/bin/env bash
# test_chat.sh LAMINA SHARED - `lamina chat` driven through a pipe:
#  - a scripted conversation (a multi-line message, /prompt, /save, /clear,
#    an unknown command) gives the same output twice (greedy);
#  - each reply equals what `lamina run` generates from the same rendered
#    prompt (/prompt writes it): the second turn, decoded after the prefix the
#    KV cache already held, gives the fresh run's text, so prefix reuse is right;
#  - /clear forgets the conversation (the next turn renders as the first did);
#  - /save writes the conversation as JSON, with the multi-line message;
#  - with -c 128 and many turns the oldest turns are dropped (the system
#    prompt stays) and the reply after the shift is still the fresh run's;
#    a reply longer than the window goes on (its older half leaves the cache);
#  - bad flags are usage errors (exit 2), a missing model or a bad template a
#    runtime error (exit 1), never a crash.
. "$(dirname "$0")/lib.sh"
export LC_ALL=C # ${#var} counts bytes
M=$SHARED/models/stories260K.gguf
FLAGS=(-m "$M" --temp 0 -n 20 -t 2)

# the reply `lamina run` gives for prompt file $1 (extra flags after it), without
# the echoed prompt and the leading white space chat does not print
fresh() {
  local p=$1
  shift
  "$LAMINA" run "${FLAGS[@]}" "$@" -f "$p" >"$tmp/fresh.out" 2>/dev/null || echo "(run failed)"
  local len
  len=$(wc -c <"$p")
  local r
  r=$(tail -c +$((len + 1)) "$tmp/fresh.out")
  printf '%s' "${r#"${r%%[![:space:]]*}"}"
}

cat >"$tmp/script.txt" <<END
Hello there
/prompt $tmp/p1.txt
Tell me a story\\
about a cat
/prompt $tmp/p2.txt
/save $tmp/conv.json
/nosuchcommand
/clear
Hello there
/prompt $tmp/p3.txt
/exit
END
"$LAMINA" chat "${FLAGS[@]}" <"$tmp/script.txt" >"$tmp/out1.txt" 2>"$tmp/err1.txt"
rc=$?
[ $rc -eq 0 ] && ok || { bad "chat exited $rc"; cat "$tmp/err1.txt" >&2; }
"$LAMINA" chat "${FLAGS[@]}" <"$tmp/script.txt" >"$tmp/out2.txt" 2>/dev/null
cmp -s "$tmp/out1.txt" "$tmp/out2.txt" && ok || bad "two runs of the same conversation differ"
grep -q "unknown command '/nosuchcommand'" "$tmp/err1.txt" && ok || bad "no message for an unknown command"

[ -s "$tmp/p1.txt" ] && [ -s "$tmp/p2.txt" ] && ok || bad "/prompt wrote nothing"
grep -q "Hello there" "$tmp/p1.txt" && ok || bad "prompt 1 lacks the message"
grep -q "Tell me a story" "$tmp/p2.txt" && grep -q "^about a cat" "$tmp/p2.txt" && ok ||
  bad "the multi-line message is not in prompt 2"
cmp -s "$tmp/p1.txt" "$tmp/p3.txt" && ok || bad "after /clear the prompt differs from the first turn's"

r1=$(fresh "$tmp/p1.txt")
r2=$(fresh "$tmp/p2.txt")
[ -n "$r1" ] && [ -n "$r2" ] && ok || bad "empty replies"
grep -qF "${r1%%$'\n'*}" "$tmp/p2.txt" && ok || bad "reply 1 is not in prompt 2"
printf '%s\n%s\n%s\n' "$r1" "$r2" "$r1" >"$tmp/want.txt"
if cmp -s "$tmp/want.txt" "$tmp/out1.txt"; then ok; else
  bad "chat replies differ from fresh runs of the same prompts"
  diff "$tmp/want.txt" "$tmp/out1.txt" >&2
fi

# /save: JSON with the four messages before /clear
if command -v python3 >/dev/null; then
  python3 - "$tmp/conv.json" <<'PY' && ok || bad "/save: wrong JSON"
import json, sys
m = json.load(open(sys.argv[1]))["messages"]
assert [x["role"] for x in m] == ["user", "assistant", "user", "assistant"], m
assert m[0]["content"] == "Hello there" and m[2]["content"] == "Tell me a story\nabout a cat", m
assert all(x["content"] for x in m), m
PY
else
  grep -q '"content": "Tell me a story\\nabout a cat"' "$tmp/conv.json" && ok || bad "/save: no multi-line message"
fi

# context shift: -c 128, a system prompt and many turns
{
  echo "Alpha is the first word"
  for i in 1 2 3 4 5 6 7; do echo "Tell me more about the dog number $i"; done
  echo "/prompt $tmp/plast.txt"
  echo "/save $tmp/long.json"
} >"$tmp/long.txt"
"$LAMINA" chat "${FLAGS[@]}" -c 128 -sys "You tell stories." <"$tmp/long.txt" >"$tmp/long.out" 2>"$tmp/long.err"
rc=$?
[ $rc -eq 0 ] && ok || { bad "long chat exited $rc"; cat "$tmp/long.err" >&2; }
grep -qi "error" "$tmp/long.err" && bad "long chat: $(cat "$tmp/long.err")" || ok
grep -q "dog number 7" "$tmp/plast.txt" && grep -q "You tell stories." "$tmp/plast.txt" && ok ||
  bad "after the shift the prompt lacks the system prompt or the last message"
grep -q "Alpha" "$tmp/plast.txt" && bad "the oldest turn was not dropped" || ok
last=$(fresh "$tmp/plast.txt" -c 128)
[ -n "$last" ] && [ "$(tail -c $((${#last} + 1)) "$tmp/long.out")" = "$last" ] && ok ||
  bad "the reply after a context shift differs from a fresh run ('$last')"

# a reply longer than the window: the older part of it leaves the cache, it goes on
printf 'Tell me a long story\nAnd another one\n' |
  "$LAMINA" chat -m "$M" --temp 0 -n 150 -c 128 -t 2 >"$tmp/lr.out" 2>"$tmp/lr.err"
rc=$?
[ $rc -eq 0 ] && [ "$(wc -l <"$tmp/lr.out")" -ge 2 ] && ! grep -qi "error\|cut" "$tmp/lr.err" && ok ||
  bad "long reply with -c 128: exit $rc: $(cat "$tmp/lr.err")"

# bad input
for args in "" "-m $M --bogus" "-m $M --temp abc" "-m $M -n x" "-m $M --chat-template nosuchformat" "-m $M -c"; do
  # shellcheck disable=SC2086
  "$LAMINA" chat $args </dev/null >/dev/null 2>"$tmp/e.txt"
  rc=$?
  [ $rc -eq 2 ] && [ -s "$tmp/e.txt" ] && ok || bad "'lamina chat $args' exited $rc (want 2)"
done
"$LAMINA" chat -m /nonexistent.gguf </dev/null >/dev/null 2>"$tmp/e.txt"
rc=$?
[ $rc -eq 1 ] && [ -s "$tmp/e.txt" ] && ok || bad "missing model: exit $rc"
"$LAMINA" chat -m "$M" --chat-template "{% if %}{{ x" </dev/null >/dev/null 2>"$tmp/e.txt"
rc=$?
[ $rc -eq 1 ] && grep -q "error" "$tmp/e.txt" && ok || bad "bad template: exit $rc"
"$LAMINA" chat --help | grep -q -- "/save" && ok || bad "chat --help"

finish
