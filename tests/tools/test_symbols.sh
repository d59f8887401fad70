#!/bin/bash
# test_symbols.sh - every global symbol liblamina.a defines carries the
# project's prefix (lm_ inside, llama_/lamina_ for the public API), so linking
# lamina into a program cannot clash with its own names (kernel names such as
# vec_dot_f32_avx2 once leaked). Needs nm (binutils); skipped without it.
source "$(dirname "$0")/lib.sh"
lib=$(dirname "$(dirname "$LAMINA")")/liblamina.a
command -v nm >/dev/null || { echo "SKIP: no nm"; exit 0; }
[ -f "$lib" ] && ok || bad "no $lib"
nm -g --defined-only "$lib" 2>/dev/null | awk '$2 ~ /^[TDBRCGSV]$/ { print $3 }' | sort -u > "$tmp/syms"
[ -s "$tmp/syms" ] && ok || bad "nm listed nothing"
# names the compiler or a sanitizer makes (reserved: "__" first) are not ours
grep -v -E '^(lm_|llama_|lamina_|__)' "$tmp/syms" > "$tmp/leaks"
if [ -s "$tmp/leaks" ]; then bad "unprefixed symbols: $(head -5 "$tmp/leaks" | tr '\n' ' ')"; else ok; fi
finish
