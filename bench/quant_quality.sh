#!/usr/bin/env bash
# quant_quality.sh - how much each quantization type changes a model's output:
# quantizes an F32 model to every type `lamina quantize --help` lists and
# prints a markdown table of each copy's perplexity and its KL divergence from
# the F32 model (`lamina perplexity --kl-divergence`, docs/quality.md). Types
# that do not quantize (rows that are not a multiple of the block size, IQ2
# without an importance matrix, ...) are listed as skipped, with the reason.
#
# usage: bench/quant_quality.sh [--mkmodel NAME] [--layers N] [--chunks N]
#   models: stories260K (shared/models, the first 64 KiB of
#   shared/corpus/heldout.txt, -c 128, every chunk) and, with --mkmodel, an
#   F32 `lamina mkmodel NAME` model (synthetic weights: its PPL means nothing,
#   its KL divergence still measures the quantization error) on --chunks N
#   (default 4) chunks of the same text.
# environment: LAMINA (default build/tools/lamina), SHARED (default ../shared),
#   THREADS (default: all cores), TMPDIR.
# Not a test: it takes minutes with --mkmodel (one quantize and one
# perplexity run per type).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
LAMINA=${LAMINA:-$ROOT/build/tools/lamina}
SHARED=${SHARED:-$ROOT/../shared}
THREADS=${THREADS:-$(nproc)}
MK= LAYERS= CHUNKS=4
while [ $# -gt 0 ]; do
  case $1 in
  --mkmodel) MK=$2; shift 2 ;;
  --layers) LAYERS=$2; shift 2 ;;
  --chunks) CHUNKS=$2; shift 2 ;;
  -h | --help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -x "$LAMINA" ] || { echo "no lamina binary at $LAMINA (set LAMINA)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
head -c 65536 "$SHARED/corpus/heldout.txt" >"$work/text.txt" || exit 1

# The quantize types, in the order of `lamina quantize --help`.
types=$("$LAMINA" quantize --help | sed -n 's/^ *[0-9]* *or *\([A-Z0-9_]*\) *:.*/\1/p')

# field NAME FILE: the value after "NAME :" in a --kl-divergence report.
field() { sed -n "s/^$1 *: *\([-0-9.e]*\).*/\1/p" "$2" | head -n 1; }

# table LABEL F32.gguf PERPLEXITY-ARGS...: the markdown table for one model.
table() {
  local label=$1 f32=$2 t
  shift 2
  echo "### $label"
  echo
  "$LAMINA" perplexity -m "$f32" -f "$work/text.txt" -t "$THREADS" "$@" --kl-divergence-base "$work/base.kld" \
    >"$work/base.txt" 2>"$work/err.txt" || { cat "$work/err.txt" >&2; return 1; }
  echo "F32 base: $(grep '^Final estimate' "$work/base.txt"), $(grep -o '^bits per byte: [0-9.]*' "$work/base.txt")"
  # an importance matrix of the F32 model over the same text, for the types
  # that need one (IQ2_XXS, IQ2_XS, Q2_K_S: marked "+ imatrix")
  "$LAMINA" imatrix -m "$f32" -f "$work/text.txt" -t "$THREADS" "$@" -o "$work/imatrix.dat" \
    >/dev/null 2>"$work/err.txt" || { cat "$work/err.txt" >&2; return 1; }
  echo
  echo "| type | size (MiB) | PPL | ln(PPL(Q)/PPL(base)) | mean KLD | same top token |"
  echo "|---|---:|---:|---:|---:|---:|"
  local skipped=
  for t in $types; do
    local name=$t
    if ! "$LAMINA" quantize --nthread "$THREADS" "$f32" "$work/q.gguf" "$t" >/dev/null 2>"$work/qerr.txt" &&
      grep -qi 'importance matrix' "$work/qerr.txt"; then
      name="$t + imatrix"
      "$LAMINA" quantize --nthread "$THREADS" --imatrix "$work/imatrix.dat" "$f32" "$work/q.gguf" "$t" \
        >/dev/null 2>"$work/qerr.txt"
    fi
    if [ ! -s "$work/q.gguf" ] || grep -q '^error' "$work/qerr.txt"; then
      skipped="$skipped- $t: $(grep -m1 -v '^error: quantizing' "$work/qerr.txt" | sed 's/^[a-z_]*: //')"$'\n'
      rm -f "$work/q.gguf"
      continue
    fi
    if ! "$LAMINA" perplexity -m "$work/q.gguf" -t "$THREADS" --kl-divergence \
      --kl-divergence-base "$work/base.kld" >"$work/kl.txt" 2>"$work/err.txt"; then
      skipped="$skipped- $t: perplexity failed: $(grep -m1 error "$work/err.txt")"$'\n'
      continue
    fi
    printf '| %s | %.2f | %s ± %s | %s ± %s | %s ± %s | %s %% |\n' "$name" \
      "$(awk -v b="$(stat -c %s "$work/q.gguf")" 'BEGIN { print b / 1048576 }')" \
      "$(field 'Mean PPL(Q)' "$work/kl.txt")" "$(sed -n 's/^Mean PPL(Q) .*± *//p' "$work/kl.txt")" \
      "$(field 'Mean ln(PPL(Q)\/PPL(base))' "$work/kl.txt")" \
      "$(sed -n 's/^Mean ln(PPL(Q)\/PPL(base)) .*± *//p' "$work/kl.txt")" \
      "$(field 'Mean    KLD' "$work/kl.txt")" "$(sed -n 's/^Mean    KLD: .*± *//p' "$work/kl.txt")" \
      "$(field 'Same top p' "$work/kl.txt")"
    rm -f "$work/q.gguf"
  done
  echo
  [ -n "$skipped" ] && printf 'Skipped:\n%s\n' "$skipped"
}

table "stories260K (F32), -c 128, first 64 KiB of heldout.txt" "$SHARED/models/stories260K.gguf" -c 128
if [ -n "$MK" ]; then
  mkargs=(--type F32 --threads "$THREADS")
  [ -n "$LAYERS" ] && mkargs+=(--layers "$LAYERS")
  LM_SHARED_DIR=$SHARED "$LAMINA" mkmodel "$MK" "$work/mk.gguf" "${mkargs[@]}" >/dev/null 2>"$work/err.txt" ||
    { cat "$work/err.txt" >&2; exit 1; }
  table "mkmodel $MK${LAYERS:+ --layers $LAYERS} (F32, synthetic weights), -c 128, $CHUNKS chunks" \
    "$work/mk.gguf" -c 128 --chunks "$CHUNKS"
fi
