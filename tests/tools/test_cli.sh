#!/usr/bin/env bash
# test_cli.sh LAMINA SHARED - the lamina command line:
#  - `lamina run` on stories260K from BOS, greedy, 200 tokens prints exactly the
#    reference text (stdout holds nothing else);
#  - tokenize / inspect work and agree with the reference ids;
#  - bad input (missing model, truncated file, unknown option) gives a message
#    on stderr and a non-zero exit, never a crash.
. "$(dirname "$0")/lib.sh"
M=$SHARED/models/stories260K.gguf

"$LAMINA" run -m "$M" -n 200 --temp 0 --repeat-penalty 1 >"$tmp/out.txt" 2>"$tmp/err.txt" || bad "run exited $?"
if cmp -s "$tmp/out.txt" "$SHARED/models/stories260K.greedy200.txt"; then ok; else bad "golden text differs"; fi
grep -q "generation: 200 tokens" "$tmp/err.txt" && ok || bad "no speed summary on stderr"

"$LAMINA" run -m "$M" -n 200 --temp 0 --repeat-penalty 1 -t 1 --no-mmap -b 1 >"$tmp/out1.txt" 2>/dev/null
cmp -s "$tmp/out1.txt" "$SHARED/models/stories260K.greedy200.txt" && ok || bad "golden text differs with -t 1 --no-mmap"

# device placement flags (llama.cpp's): on a CPU-only build every layer stays on
# the CPU and the text is the same
"$LAMINA" run -m "$M" -n 200 --temp 0 --repeat-penalty 1 -ngl 99 -sm row -mg 0 -ts 1 -nkvo >"$tmp/outg.txt" 2>/dev/null
cmp -s "$tmp/outg.txt" "$SHARED/models/stories260K.greedy200.txt" && ok || bad "golden text differs with -ngl 99 -sm row"
"$LAMINA" bench -m "$M" -p 8 -n 2 -r 1 -t 1 -ngl 99 -sm none -nkvo 1 >/dev/null 2>&1 && ok || bad "bench -ngl failed"
for args in "-sm diagonal" "-mg -1" "-ts 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17" "-ts x" "-ts -1" "-ngl abc"; do
  # shellcheck disable=SC2086
  "$LAMINA" run -m "$M" -n 1 $args >/dev/null 2>"$tmp/e.txt"
  rc=$?
  [ $rc -eq 2 ] && grep -q "error" "$tmp/e.txt" && ok || bad "'run $args' exited $rc"
done
"$LAMINA" run --help | grep -q -- "--n-gpu-layers" && ok || bad "run --help lacks -ngl"

# the ids of the reference text, through the tokenizer
ids=$("$LAMINA" tokenize -m "$M" -p "Once upon a time" --ids)
[ "$ids" = "1 403 407 261 378" ] && ok || bad "tokenize gave '$ids'"

"$LAMINA" inspect "$M" >"$tmp/inspect.txt" || bad "inspect failed"
grep -q "llama.embedding_length" "$tmp/inspect.txt" && grep -q "blk.4.ffn_up.weight" "$tmp/inspect.txt" && ok ||
  bad "inspect output incomplete"

# bad input
for args in "run" "run -m /nonexistent.gguf" "run -m $M --top-k abc" "run -m $M --bogus" "inspect /nonexistent" \
  "tokenize -m $M" "nosuchcommand"; do
  # shellcheck disable=SC2086
  "$LAMINA" $args >/dev/null 2>"$tmp/e.txt"
  rc=$?
  if [ $rc -ne 0 ] && [ $rc -lt 128 ] && [ -s "$tmp/e.txt" ]; then ok; else bad "'lamina $args' exited $rc"; fi
done
head -c 20000 "$M" >"$tmp/trunc.gguf"
"$LAMINA" run -m "$tmp/trunc.gguf" -n 1 >/dev/null 2>"$tmp/e.txt"
rc=$?
[ $rc -eq 1 ] && grep -qi "error" "$tmp/e.txt" && ok || bad "truncated model: exit $rc"
"$LAMINA" run --help | grep -q -- "--repeat-penalty" && ok || bad "run --help"

# KV cache types: a Q8_0 K and V cache on 64-wide heads (the persimmon fixture) generates, the same
# greedy text twice; stories260K's 8-wide heads are not whole Q8_0 blocks: refused with the reason
for i in 1 2; do
  "$LAMINA" run -m "$SHARED/fixtures/arch/persimmon.gguf" -n 8 -p "Once upon a time" --temp 0 -t 2 \
    -ctk q8_0 -ctv q8_0 >"$tmp/q$i.txt" 2>"$tmp/e.txt"
  rc=$?
  [ $rc -eq 0 ] && grep -q "generation: 8 tokens" "$tmp/e.txt" && ok || bad "-ctv q8_0: exit $rc: $(tail -2 "$tmp/e.txt")"
done
cmp -s "$tmp/q1.txt" "$tmp/q2.txt" && ok || bad "-ctv q8_0: greedy text differs between runs"
"$LAMINA" run -m "$SHARED/models/stories260K.gguf" -n 4 -p "Once" -ctv q8_0 >/dev/null 2>"$tmp/e.txt"
rc=$?
[ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -q "must be whole blocks" "$tmp/e.txt" && ok ||
  bad "-ctv q8_0 on 8-wide heads: exit $rc: $(tail -2 "$tmp/e.txt")"

finish
