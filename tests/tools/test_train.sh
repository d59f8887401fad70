#!/bin/bash
# test_train.sh - `lamina train` end to end on a small text (seconds): it
# writes a llama GGUF that `lamina run`, `lamina perplexity` and
# `lamina inspect` load; the loss goes down; a run resumed from its
# checkpoint writes the same bytes as the uninterrupted run; the same seed
# gives the same file; bad options and files get an error, never a crash.
# lamina finetune: an adapter trained on a tiny text lowers its perplexity.
source "$(dirname "$0")/lib.sh"

head -c 120000 "$SHARED/corpus/train/tinystories-v1-train-head-2MiB.txt" > "$tmp/train.txt"
head -c 20000 "$SHARED/corpus/heldout.txt" > "$tmp/valid.txt"
args=(--train "$tmp/train.txt" --vocab 300 --dim 32 --layers 2 --heads 4 --kv-heads 2 --ctx 32 --batch 4
      --steps 24 --warmup 2 --lr 3e-3 --seed 7 -t 2)

# 1. a run with held-out loss, a checkpoint every 12 steps
if "$LAMINA" train "${args[@]}" --valid "$tmp/valid.txt" --eval-every 12 --save-every 12 \
     -o "$tmp/a.gguf" > "$tmp/a.out" 2> "$tmp/a.err"; then ok; else cat "$tmp/a.err" >&2; bad "train failed"; fi
[ -s "$tmp/a.gguf" ] && ok || bad "no model written"
[ -s "$tmp/a.gguf.ckpt" ] && ok || bad "no checkpoint written"
grep -q "step 24: train loss" "$tmp/a.out" && ok || bad "no held-out loss line"
first=$(sed -n 's/.*held-out loss \([0-9.]*\)/\1/p' "$tmp/a.out" | head -1)
last=$(sed -n 's/.*held-out loss \([0-9.]*\)/\1/p' "$tmp/a.out" | tail -1)
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a && a < 6.0) }' && ok || bad "held-out loss did not fall: $first -> $last"
ls "$tmp" | grep -q '\.tmp\.' && bad "temporary file left behind" || ok

# 2. the file is an ordinary model
"$LAMINA" inspect "$tmp/a.gguf" > "$tmp/inspect.txt" 2>&1 && ok || bad "inspect failed"
grep -q "llama" "$tmp/inspect.txt" && ok || bad "inspect: not a llama model"
"$LAMINA" run -m "$tmp/a.gguf" -p "Once upon a time" -n 8 --temp 0 > "$tmp/run.txt" 2>&1 && ok || bad "run failed"
grep -q "^Once upon a time" "$tmp/run.txt" && ok || bad "run: no text"
"$LAMINA" perplexity -m "$tmp/a.gguf" -f "$tmp/valid.txt" -c 32 --chunks 4 > "$tmp/ppl.txt" 2>&1 && ok || bad "perplexity failed"

# 3. same seed: same bytes; resumed from the step-12 checkpoint: same bytes
"$LAMINA" train "${args[@]}" --save-every 12 -o "$tmp/b.gguf" 2> "$tmp/b.err" && ok || bad "second run failed"
cmp -s "$tmp/a.gguf" "$tmp/b.gguf" && ok || bad "same seed gave a different model"
"$LAMINA" train "${args[@]}" --resume "$tmp/b.gguf.ckpt" -o "$tmp/c.gguf" 2> "$tmp/c.err" && ok || { cat "$tmp/c.err" >&2; bad "resume failed"; }
grep -q "resuming" "$tmp/c.err" && ok || bad "resume: no message"
cmp -s "$tmp/a.gguf" "$tmp/c.gguf" && ok || bad "resumed run differs from the uninterrupted one"
"$LAMINA" train "${args[@]}" --out-type f16 --save-every 0 -o "$tmp/h.gguf" 2>/dev/null && ok || bad "f16 output failed"
s32=$(stat -c %s "$tmp/a.gguf"); s16=$(stat -c %s "$tmp/h.gguf")
[ "$s16" -lt "$s32" ] && ok || bad "f16 file not smaller ($s16 vs $s32)"

# 4. bad input: an error message and status 1 or 2, never a crash
expect_error() {
  local what=$1; shift
  "$LAMINA" train "$@" > "$tmp/e.out" 2> "$tmp/e.err"
  local s=$?
  if [ $s -eq 1 ] || [ $s -eq 2 ]; then
    grep -q "error" "$tmp/e.err" && ok || bad "$what: no error message"
  else
    bad "$what: status $s"
  fi
}
expect_error "no --train" -o "$tmp/x.gguf"
expect_error "missing file" --train "$tmp/nope.txt" -o "$tmp/x.gguf"
expect_error "vocab too small" --train "$tmp/train.txt" --vocab 10 -o "$tmp/x.gguf"
expect_error "heads do not divide dim" "${args[@]}" --heads 3 -o "$tmp/x.gguf"
expect_error "kv heads do not divide heads" "${args[@]}" --kv-heads 3 -o "$tmp/x.gguf"
expect_error "bad lr" "${args[@]}" --lr -1 -o "$tmp/x.gguf"
expect_error "unknown option" "${args[@]}" --frobnicate 1 -o "$tmp/x.gguf"
expect_error "bad out type" "${args[@]}" --out-type q4 -o "$tmp/x.gguf"
: > "$tmp/empty.txt"
expect_error "empty text" --train "$tmp/empty.txt" -o "$tmp/x.gguf"
head -c 200 "$tmp/train.txt" > "$tmp/tiny.txt"
expect_error "text too short" --train "$tmp/tiny.txt" --vocab 260 --ctx 512 -o "$tmp/x.gguf"
expect_error "resume from a model, not a checkpoint" "${args[@]}" --resume "$tmp/a.gguf" -o "$tmp/x.gguf"
head -c 3000 "$tmp/a.gguf.ckpt" > "$tmp/trunc.ckpt"
expect_error "truncated checkpoint" "${args[@]}" --resume "$tmp/trunc.ckpt" -o "$tmp/x.gguf"
expect_error "resume with another shape" --train "$tmp/train.txt" --dim 64 --resume "$tmp/a.gguf.ckpt" -o "$tmp/x.gguf"
expect_error "unwritable output" "${args[@]}" --steps 2 --save-every 0 -o "$tmp/no/such/dir/x.gguf"

# 5. lamina finetune: a LoRA adapter trained on a tiny text lowers that text's
# perplexity when applied (lamina perplexity --lora), on stories260K (F32,
# tied output) and on a quantized base; a bad adapter is refused
base_model=$SHARED/models/stories260K.gguf
for i in $(seq 40); do echo "The purple robot sang a song about green cheese and blue moons."; done > "$tmp/ft.txt"
ppl() { "$LAMINA" perplexity -f "$tmp/ft.txt" -c 32 "$@" 2>&1 | sed -n 's/.*PPL = \([0-9.]*\).*/\1/p'; }
fargs=(--train "$tmp/ft.txt" --ctx 32 --batch 4 --steps 20 --lr 1e-2 --rank 4 --alpha 8 -t 2)
if "$LAMINA" finetune -m "$base_model" "${fargs[@]}" -o "$tmp/ad.bin" 2> "$tmp/ft.err"; then ok; else
  cat "$tmp/ft.err" >&2; bad "finetune failed"; fi
before=$(ppl -m "$base_model"); after=$(ppl -m "$base_model" --lora "$tmp/ad.bin")
awk -v a="$before" -v b="$after" 'BEGIN { exit !(b > 0 && b < 0.5 * a) }' && ok || bad "adapter did not lower the perplexity: $before -> $after"
"$LAMINA" finetune -m "$base_model" "${fargs[@]}" --grad-checkpoint --lora-targets q,k,v,o,gate,down,up \
  -o "$tmp/ad2.bin" 2>/dev/null && ok || bad "finetune --grad-checkpoint failed"
after2=$(ppl -m "$base_model" --lora "$tmp/ad2.bin")
awk -v a="$before" -v b="$after2" 'BEGIN { exit !(b > 0 && b < 0.5 * a) }' && ok || bad "all-target adapter: $before -> $after2"
"$LAMINA" quantize "$tmp/a.gguf" "$tmp/q8.gguf" Q8_0 > /dev/null 2>&1 && ok || bad "quantize failed"
"$LAMINA" finetune -m "$tmp/q8.gguf" "${fargs[@]}" --steps 2 -o "$tmp/q.bin" 2>/dev/null && ok || bad "finetune of a Q8_0 base failed"
"$LAMINA" run -m "$tmp/q8.gguf" --lora "$tmp/q.bin" -p "Once" -n 4 > /dev/null 2>&1 && ok || bad "Q8_0 base + adapter did not run"
"$LAMINA" finetune -m "$tmp/h.gguf" "${fargs[@]}" --steps 2 -o "$tmp/h.bin" 2>/dev/null && ok || bad "finetune of an F16 base failed"
"$LAMINA" finetune -m "$base_model" "${fargs[@]}" --out-type f16 -o "$tmp/x.bin" 2>/dev/null; [ $? -eq 2 ] && ok || bad "finetune took a train-only option"
head -c 100 "$tmp/ad.bin" > "$tmp/trunc.bin"
"$LAMINA" perplexity -m "$base_model" -f "$tmp/ft.txt" -c 32 --lora "$tmp/trunc.bin" > /dev/null 2>&1
s=$?; [ $s -ne 0 ] && [ $s -lt 128 ] && ok || bad "truncated adapter: status $s"
"$LAMINA" perplexity -m "$tmp/a.gguf" -f "$tmp/ft.txt" -c 32 --lora "$tmp/ad.bin" > /dev/null 2>&1
s=$?; [ $s -ne 0 ] && [ $s -lt 128 ] && ok || bad "adapter of another model: status $s"
expect_ft_error() {
  local what=$1; shift
  "$LAMINA" finetune "$@" > /dev/null 2> "$tmp/e.err"
  local s=$?
  { [ $s -eq 1 ] || [ $s -eq 2 ]; } && grep -q "error" "$tmp/e.err" && ok || bad "finetune $what: status $s"
}
expect_ft_error "without a model" --train "$tmp/ft.txt" -o "$tmp/x.bin"
expect_ft_error "bad target" -m "$base_model" "${fargs[@]}" --lora-targets q,nope -o "$tmp/x.bin"
expect_ft_error "rank 0" -m "$base_model" "${fargs[@]}" --rank 0 -o "$tmp/x.bin"
expect_ft_error "rank above dim" -m "$base_model" "${fargs[@]}" --rank 100 -o "$tmp/x.bin"
expect_ft_error "not a model" -m "$tmp/ft.txt" --train "$tmp/ft.txt" -o "$tmp/x.bin"
expect_ft_error "missing model" -m "$tmp/nope.gguf" --train "$tmp/ft.txt" -o "$tmp/x.bin"

finish
