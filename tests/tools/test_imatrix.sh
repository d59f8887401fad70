#!/usr/bin/env bash
# test_imatrix.sh LAMINA SHARED - `lamina imatrix` and `lamina quantize
# --imatrix` (the numbers themselves are checked against a computation by
# hand in tests/api/test_api_imatrix.c, the file format in
# tests/model/test_imatrix.c):
#  - stories260K over the first 64 KiB of shared/corpus/heldout.txt at -c 128:
#    the chunk list and final PPL (the same as `lamina perplexity`'s), the
#    file (35 entries, b1892's layout), periodic and numbered saves, the same
#    bytes for 1 and 2 threads;
#  - quantize of the synthetic 8-layer fixture with an imatrix collected on
#    it: Q4_K_M differs from without, --exclude-weights of everything equals
#    without, IQ2_XS works with it (when lamina can encode it) and not without;
#  - llama-moe (split experts): an entry per expert, and quantizing with it;
#  - another model's imatrix, a truncated, garbage or empty file, bad flags:
#    a message and exit 1 (runtime) or 2 (usage), no output file;
#  - no progress bar (no carriage returns) when stderr is not a terminal.
. "$(dirname "$0")/lib.sh"
M=$SHARED/models/stories260K.gguf
SYN=$SHARED/fixtures/quantize/synth-llama-f16.gguf
head -c 65536 "$SHARED/corpus/heldout.txt" >"$tmp/text.txt"
I=("$LAMINA" imatrix -f "$tmp/text.txt" -c 128)

# collection on stories260K
"${I[@]}" -m "$M" --chunks 6 -t 1 -o "$tmp/im.dat" --output-frequency 2 --save-frequency 3 >"$tmp/out.txt" \
  2>"$tmp/err.txt" || bad "imatrix exited $?: $(tail -3 "$tmp/err.txt")"
grep -q "^\[1\][0-9.]*,\[2\].*\[6\][0-9.]*,$" "$tmp/out.txt" && ok || bad "no chunk list: $(head -c 200 "$tmp/out.txt")"
grep -q "^Final estimate: PPL = [0-9.]* +/- [0-9.]*$" "$tmp/out.txt" && ok || bad "no final estimate"
[ "$(grep -c "stored collected data after [246] chunks in $tmp/im.dat (35 entries)" "$tmp/err.txt")" = 3 ] && ok ||
  bad "saves: $(cat "$tmp/err.txt")"
[ -s "$tmp/im.dat.at_3" ] && [ -s "$tmp/im.dat.at_6" ] && [ ! -e "$tmp/im.dat.at_2" ] && ok || bad "numbered saves"
[ ! -e "$tmp/im.dat.tmp" ] && ok || bad "temporary file left behind"
grep -q $'\r' "$tmp/err.txt" && bad "carriage return in a log" || ok
# b1892's layout: int32 n_entries, then int32 len, name, int32 ncall, int32 nval, floats
[ "$(od -An -t d4 -N4 "$tmp/im.dat" | tr -d ' ')" = 35 ] && ok || bad "entry count"
n=$(od -An -t d4 -j4 -N4 "$tmp/im.dat" | tr -d ' ')
name=$(dd if="$tmp/im.dat" bs=1 skip=8 count="$n" 2>/dev/null)
counts=$(od -An -t d4 -j$((8 + n)) -N8 "$tmp/im.dat" | tr -s ' ')
[[ "$name" =~ ^blk\.0\.attn_[qkv]\.weight$ ]] && [ "$counts" = " 6 64" ] && ok || bad "first entry: '$name' '$counts'"
if "$LAMINA" perplexity --help >/dev/null 2>&1; then
  "$LAMINA" perplexity -m "$M" -f "$tmp/text.txt" -c 128 --chunks 6 -t 1 2>/dev/null | grep "^Final estimate" \
    >"$tmp/ppl.txt"
  grep -q "^Final estimate" "$tmp/out.txt" && cmp -s "$tmp/ppl.txt" <(grep "^Final estimate" "$tmp/out.txt") && ok ||
    bad "PPL differs from lamina perplexity: $(cat "$tmp/ppl.txt")"
fi
"${I[@]}" -m "$M" --chunks 6 -t 2 -o "$tmp/im2.dat" >/dev/null 2>&1
cmp -s "$tmp/im.dat" "$tmp/im2.dat" && ok || bad "the file depends on the thread count"
"${I[@]}" -m "$M" --chunks 2 -t 1 -o "$tmp/im-out.dat" --process-output >/dev/null 2>&1
[ "$(od -An -t d4 -N4 "$tmp/im-out.dat" | tr -d ' ')" = 36 ] && grep -q "output.weight" "$tmp/im-out.dat" && ok ||
  bad "--process-output"

# quantize with it (the synthetic fixture: rows of 256 and 512)
"${I[@]}" -m "$SYN" --chunks 2 -t 2 -o "$tmp/syn.dat" >/dev/null 2>"$tmp/err.txt" || bad "imatrix on synth: $(cat "$tmp/err.txt")"
Q=("$LAMINA" quantize --nthread 2)
"${Q[@]}" "$SYN" "$tmp/plain.gguf" Q4_K_M 2>/dev/null || bad "quantize without imatrix"
"${Q[@]}" --imatrix "$tmp/syn.dat" "$SYN" "$tmp/with.gguf" Q4_K_M 2>"$tmp/err.txt" || bad "quantize --imatrix: $(cat "$tmp/err.txt")"
grep -q "using 56 of 56 entries" "$tmp/err.txt" && ok || bad "no imatrix line: $(cat "$tmp/err.txt")"
[ -s "$tmp/with.gguf" ] && ! cmp -s "$tmp/plain.gguf" "$tmp/with.gguf" && ok || bad "the imatrix changed nothing"
"${Q[@]}" --imatrix "$tmp/syn.dat" --exclude-weights blk. "$SYN" "$tmp/none.gguf" Q4_K_M 2>/dev/null
cmp -s "$tmp/plain.gguf" "$tmp/none.gguf" && ok || bad "--exclude-weights of everything is not as without"
"${Q[@]}" --imatrix "$tmp/syn.dat" --include-weights ffn_down "$SYN" "$tmp/down.gguf" Q4_K_M 2>/dev/null
[ -s "$tmp/down.gguf" ] && ! cmp -s "$tmp/down.gguf" "$tmp/plain.gguf" && ! cmp -s "$tmp/down.gguf" "$tmp/with.gguf" &&
  ok || bad "--include-weights"
if "$LAMINA" quantize --help | grep "IQ2_XS" | grep -vq "not implemented"; then
  "${Q[@]}" --imatrix "$tmp/syn.dat" "$SYN" "$tmp/iq2.gguf" IQ2_XS 2>"$tmp/err.txt" && [ -s "$tmp/iq2.gguf" ] && ok ||
    bad "IQ2_XS with an imatrix: $(tail -2 "$tmp/err.txt")"
  "$LAMINA" run -m "$tmp/iq2.gguf" -n 4 -p "Once" --temp 0 -t 2 >/dev/null 2>&1 && ok || bad "running the IQ2_XS model"
  "${Q[@]}" "$SYN" "$tmp/iq2n.gguf" IQ2_XS 2>"$tmp/err.txt"
  [ $? -eq 1 ] && [ ! -e "$tmp/iq2n.gguf" ] && grep -q "Missing importance matrix" "$tmp/err.txt" && ok ||
    bad "IQ2_XS without an imatrix: $(cat "$tmp/err.txt")"
fi

# a mixture of experts with split expert tensors (b1892's layout): one entry per expert
MOE=$SHARED/fixtures/arch/llama-moe.gguf
"$LAMINA" imatrix -m "$MOE" -f "$tmp/text.txt" -c 64 --chunks 4 -t 2 -o "$tmp/moe.dat" >/dev/null 2>&1 || bad "imatrix on llama-moe"
[ "$(od -An -t d4 -N4 "$tmp/moe.dat" | tr -d ' ')" = 34 ] && grep -q "blk.1.ffn_down.3.weight" "$tmp/moe.dat" && ok ||
  bad "llama-moe entries (2 layers x (4 attention + router + 4 experts x 3))"
"${Q[@]}" --imatrix "$tmp/moe.dat" "$MOE" "$tmp/moe-q.gguf" Q4_0 2>/dev/null && "${Q[@]}" "$MOE" "$tmp/moe-0.gguf" Q4_0 \
  2>/dev/null && ! cmp -s "$tmp/moe-q.gguf" "$tmp/moe-0.gguf" && ok || bad "quantize llama-moe with its imatrix"

# bad input: a message, exit 1 or 2, no output
expect() { # expect CODE PATTERN CMD...
  local code=$1 pat=$2
  shift 2
  rm -f "$tmp/x.gguf" "$tmp/x.dat"
  "$@" >/dev/null 2>"$tmp/err.txt"
  local rc=$?
  [ $rc -eq "$code" ] && grep -qi -- "$pat" "$tmp/err.txt" && [ ! -e "$tmp/x.gguf" ] && ok ||
    bad "'$*' exited $rc (want $code), said: $(head -3 "$tmp/err.txt")"
}
expect 1 "another model" "${Q[@]}" --imatrix "$tmp/im.dat" "$SYN" "$tmp/x.gguf" Q4_K_M
head -c -5 "$tmp/syn.dat" >"$tmp/cut.dat"
expect 1 "truncated" "${Q[@]}" --imatrix "$tmp/cut.dat" "$SYN" "$tmp/x.gguf" Q4_K_M
head -c 4096 /dev/urandom >"$tmp/garbage.dat"
expect 1 "importance matrix" "${Q[@]}" --imatrix "$tmp/garbage.dat" "$SYN" "$tmp/x.gguf" Q4_K_M
: >"$tmp/empty.dat"
expect 1 "truncated" "${Q[@]}" --imatrix "$tmp/empty.dat" "$SYN" "$tmp/x.gguf" Q4_K_M
expect 1 "cannot open" "${Q[@]}" --imatrix "$tmp/nonexistent.dat" "$SYN" "$tmp/x.gguf" Q4_K_M
expect 2 "cannot be used together" "${Q[@]}" --imatrix "$tmp/syn.dat" --include-weights a --exclude-weights b "$SYN" "$tmp/x.gguf" Q4_K_M
expect 2 "need --imatrix" "${Q[@]}" --include-weights a "$SYN" "$tmp/x.gguf" Q4_K_M
expect 2 "needs a value\|missing" "${Q[@]}" "$SYN" "$tmp/x.gguf" Q4_K_M --imatrix
expect 2 "needs a model" "$LAMINA" imatrix -f "$tmp/text.txt"
expect 2 "needs a model" "$LAMINA" imatrix -m "$M"
expect 2 "unknown option" "$LAMINA" imatrix -m "$M" -f "$tmp/text.txt" --bogus
expect 2 "chunks" "$LAMINA" imatrix -m "$M" -f "$tmp/text.txt" --chunks x
expect 1 "cannot" "$LAMINA" imatrix -m "$M" -f "$tmp/nonexistent.txt" -o "$tmp/x.dat"
expect 1 "cannot load" "$LAMINA" imatrix -m "$tmp/nonexistent.gguf" -f "$tmp/text.txt" -o "$tmp/x.dat"
head -c 100 "$tmp/text.txt" >"$tmp/short.txt"
expect 1 "tokens" "$LAMINA" imatrix -m "$M" -f "$tmp/short.txt" -c 128 -o "$tmp/x.dat"
expect 1 "no matrix product" "$LAMINA" imatrix -m "$M" -f "$tmp/text.txt" -c 128 -b 8 --chunks 1 -o "$tmp/x.dat"
[ ! -e "$tmp/x.dat" ] && ok || bad "a file written without data"
expect 1 "cannot create" "$LAMINA" imatrix -m "$M" -f "$tmp/text.txt" -c 128 --chunks 1 -o "$tmp/no/such/dir.dat"
"$LAMINA" imatrix --help | grep -q "output-frequency" && ok || bad "imatrix --help"
"$LAMINA" quantize --help | grep -q -- "--imatrix FILE" && ok || bad "quantize --help"
finish
