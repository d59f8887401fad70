#!/usr/bin/env bash
# test_mkmodel.sh LAMINA SHARED - `lamina mkmodel` and `lamina quantize`:
#  - mkmodel writes tinyllama-1.1b shapes (1 layer) in Q8_0 and F16 and
#    stories15m in Q4_K_M; `lamina inspect` shows the real shapes and types,
#    `lamina run -n 4` runs on each;
#  - the file does not depend on --threads, and does depend on --seed;
#  - mkmodel's quantized recipe is quantize's: mkmodel F32 + quantize Q4_K_M
#    gives the same bytes as mkmodel Q4_K_M;
#  - `lamina quantize` (through llama_model_quantize) of the b1892 fixture
#    model gives the reference file's sha256 exactly (Q4_K_M, Q6_K);
#  - bad input gives a message and exit 1 (runtime) or 2 (usage), never a crash.
. "$(dirname "$0")/lib.sh"
FIX=$SHARED/fixtures/quantize
export LM_SHARED_DIR=$SHARED

# shape lines of `lamina inspect`: "name type [ne0, ne1]"
shape() {
  "$LAMINA" inspect "$1" | awk -v n="$2" '$2 == n { s = $4; i = 4; while (s !~ /\]$/ && i < NF) { i++; s = s " " $i }; print $2, $3, s }'
}

"$LAMINA" mkmodel tinyllama-1.1b "$tmp/tl-q8.gguf" --type Q8_0 --layers 1 2>"$tmp/e.txt" || bad "mkmodel Q8_0: $(cat "$tmp/e.txt")"
"$LAMINA" mkmodel tinyllama-1.1b "$tmp/tl-f16.gguf" --type F16 --layers 1 2>"$tmp/e.txt" || bad "mkmodel F16: $(cat "$tmp/e.txt")"
"$LAMINA" mkmodel stories15m "$tmp/s-q4km.gguf" --type Q4_K_M --threads 1 2>/dev/null || bad "mkmodel stories15m"

[ "$(shape "$tmp/tl-q8.gguf" token_embd.weight)" = "token_embd.weight q8_0 [2048, 32000]" ] && ok || bad "tinyllama token_embd"
[ "$(shape "$tmp/tl-q8.gguf" blk.0.attn_k.weight)" = "blk.0.attn_k.weight q8_0 [2048, 256]" ] && ok || bad "tinyllama attn_k (4 KV heads)"
[ "$(shape "$tmp/tl-q8.gguf" blk.0.ffn_down.weight)" = "blk.0.ffn_down.weight q8_0 [5632, 2048]" ] && ok || bad "tinyllama ffn_down"
[ "$(shape "$tmp/tl-q8.gguf" blk.0.attn_norm.weight)" = "blk.0.attn_norm.weight f32 [2048]" ] && ok || bad "tinyllama norm"
[ "$(shape "$tmp/tl-f16.gguf" output.weight)" = "output.weight f16 [2048, 32000]" ] && ok || bad "F16 output"
"$LAMINA" inspect "$tmp/tl-q8.gguf" | grep -q "llama.attention.head_count_kv *u32  = 4" && ok || bad "head_count_kv"
"$LAMINA" inspect "$tmp/tl-q8.gguf" | grep -q "tokenizer.ggml.tokens .*31992 more" && ok || bad "32000-token vocabulary"
# stories15m: rows of 288 take b1892's fallbacks (q4_K -> q5_0, q6_K -> q8_0), output q8_0
[ "$(shape "$tmp/s-q4km.gguf" blk.0.attn_q.weight)" = "blk.0.attn_q.weight q5_0 [288, 288]" ] && ok || bad "stories15m attn_q"
[ "$(shape "$tmp/s-q4km.gguf" blk.2.attn_v.weight)" = "blk.2.attn_v.weight q8_0 [288, 288]" ] && ok || bad "stories15m attn_v"
[ "$(shape "$tmp/s-q4km.gguf" blk.1.ffn_down.weight)" = "blk.1.ffn_down.weight q4_K [768, 288]" ] && ok || bad "stories15m ffn_down"
[ "$(shape "$tmp/s-q4km.gguf" output.weight)" = "output.weight q8_0 [288, 32000]" ] && ok || bad "stories15m output"

for m in tl-q8 tl-f16 s-q4km; do
  "$LAMINA" run -m "$tmp/$m.gguf" -n 4 -p "Once upon a time" --temp 0 -t 2 >"$tmp/out.txt" 2>"$tmp/e.txt"
  rc=$?
  [ $rc -eq 0 ] && [ -s "$tmp/out.txt" ] && ok || bad "run on $m exited $rc: $(tail -3 "$tmp/e.txt")"
done

# deterministic: --threads does not matter, --seed does
"$LAMINA" mkmodel stories15m "$tmp/s-t3.gguf" --type Q4_K_M --threads 3 2>/dev/null
cmp -s "$tmp/s-q4km.gguf" "$tmp/s-t3.gguf" && ok || bad "file depends on --threads"
"$LAMINA" mkmodel stories15m "$tmp/s-seed.gguf" --type Q4_K_M --seed 7 2>/dev/null
cmp -s "$tmp/s-q4km.gguf" "$tmp/s-seed.gguf" && bad "--seed changed nothing" || ok

# mkmodel's recipe = quantize's recipe
"$LAMINA" mkmodel stories15m "$tmp/s-f32.gguf" --type F32 2>/dev/null
"$LAMINA" quantize "$tmp/s-f32.gguf" "$tmp/s-f32-q4km.gguf" Q4_K_M 2>/dev/null || bad "quantize of mkmodel F32"
cmp -s "$tmp/s-q4km.gguf" "$tmp/s-f32-q4km.gguf" && ok || bad "mkmodel Q4_K_M != mkmodel F32 + quantize Q4_K_M"

# lamina quantize on the b1892 fixture: whole-file sha256
for ft in Q4_K_M Q6_K; do
  "$LAMINA" quantize "$FIX/synth-llama-f16.gguf" "$tmp/fx.gguf" $ft --nthread 2 2>"$tmp/e.txt" || bad "quantize $ft"
  want=$(awk '$1 == "FILE" { print $4 }' "$FIX/$ft.tensors.sha256")
  got=$(sha256sum "$tmp/fx.gguf" | cut -d' ' -f1)
  [ "$got" = "$want" ] && ok || bad "quantize $ft: sha256 $got, want $want"
done
"$LAMINA" quantize "$FIX/synth-llama-f16.gguf" "$tmp/fx.gguf" 15 2>/dev/null &&
  [ "$(sha256sum "$tmp/fx.gguf" | cut -d' ' -f1)" = "$(awk '$1 == "FILE" { print $4 }' "$FIX/Q4_K_M.tensors.sha256")" ] &&
  ok || bad "quantize TYPE as a number"
"$LAMINA" quantize "$FIX/synth-llama-f16.gguf" "$tmp/q2ks.gguf" Q2_K_S >/dev/null 2>"$tmp/e.txt"
rc=$?
[ $rc -eq 1 ] && grep -q "Missing importance matrix for tensor blk.0.attn_q.weight" "$tmp/e.txt" && [ ! -e "$tmp/q2ks.gguf" ] &&
  ok || bad "Q2_K_S without imatrix: exit $rc"

# other architectures: the tensors come from the architecture's own declaration
"$LAMINA" mkmodel gpt2-124m "$tmp/gpt2.gguf" --type Q8_0 --layers 1 2>"$tmp/e.txt" || bad "mkmodel gpt2: $(cat "$tmp/e.txt")"
[ "$(shape "$tmp/gpt2.gguf" position_embd.weight)" = "position_embd.weight q8_0 [768, 1024]" ] && ok || bad "gpt2 position_embd"
[ "$(shape "$tmp/gpt2.gguf" blk.0.attn_qkv.bias)" = "blk.0.attn_qkv.bias f32 [2304]" ] && ok || bad "gpt2 qkv bias"
[ "$(shape "$tmp/gpt2.gguf" token_embd.weight)" = "token_embd.weight q8_0 [768, 50257]" ] && ok || bad "gpt2 vocabulary padded to 50257"
"$LAMINA" mkmodel qwen2-0.5b "$tmp/qwen2.gguf" --type F16 --layers 1 2>"$tmp/e.txt" || bad "mkmodel qwen2: $(cat "$tmp/e.txt")"
[ "$(shape "$tmp/qwen2.gguf" blk.0.attn_k.bias)" = "blk.0.attn_k.bias f32 [128]" ] && ok || bad "qwen2 k bias (2 KV heads of 64)"
"$LAMINA" inspect "$tmp/qwen2.gguf" | grep -qE "^ *[0-9]+ +output\.weight " && bad "qwen2-0.5b has a tied output" || ok
for m in gpt2 qwen2; do
  "$LAMINA" run -m "$tmp/$m.gguf" -n 4 -p "Once upon a time" --temp 0 -t 2 >"$tmp/out.txt" 2>"$tmp/e.txt" && ok ||
    bad "run on $m: $(tail -3 "$tmp/e.txt")"
done

# bad input: exit 1 (runtime) or 2 (usage) with a message
check_rc() { # want_rc args...
  local want=$1
  shift
  "$LAMINA" "$@" >/dev/null 2>"$tmp/e.txt"
  local rc=$?
  [ $rc -eq "$want" ] && [ -s "$tmp/e.txt" ] && ok || bad "'lamina $*' exited $rc (want $want)"
}
check_rc 2 mkmodel
check_rc 2 mkmodel nosuchmodel "$tmp/x.gguf"
check_rc 2 mkmodel stories15m "$tmp/x.gguf" --type Q9_9
check_rc 2 mkmodel stories15m "$tmp/x.gguf" --layers 0
check_rc 2 mkmodel stories15m "$tmp/x.gguf" --bogus
check_rc 1 mkmodel stories15m "$tmp/x.gguf" --vocab /nonexistent/vocab.gguf
check_rc 1 mkmodel stories15m "$tmp/x.gguf" --vocab "$FIX/ids.txt"
check_rc 1 mkmodel stories15m "$tmp/x.gguf" --type IQ2_XXS
check_rc 1 mkmodel stories15m /nonexistent/dir/x.gguf --type Q8_0
check_rc 2 quantize
check_rc 2 quantize "$FIX/synth-llama-f16.gguf" "$tmp/x.gguf" Q9_9
check_rc 2 quantize "$FIX/synth-llama-f16.gguf" "$tmp/x.gguf" Q8_0 --nthread abc
check_rc 1 quantize /nonexistent.gguf "$tmp/x.gguf" Q8_0
check_rc 1 quantize "$FIX/ids.txt" "$tmp/x.gguf" Q8_0
check_rc 1 quantize "$tmp/tl-q8.gguf" "$tmp/x.gguf" Q4_0
"$LAMINA" quantize --help | grep -q "Q4_K_M" && ok || bad "quantize --help"
"$LAMINA" mkmodel --help | grep -q "tinyllama-1.1b" && ok || bad "mkmodel --help"

finish
