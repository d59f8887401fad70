#!/usr/bin/env bash
# test_extending.sh LAMINA SHARED - docs/extending.md's recipes name files
# that exist: every repository path the recipes write out (src/..., tests/...,
# docs/..., include/..., tools/..., bench/..., fuzz/..., scripts/...) and every
# path inside src/ written from its layer folder (model/arch.c, cpu/exec.c) is
# a file or folder of the tree; paths with a placeholder (<name>, *) are skipped.
# Also checks that the scan finds the paths at all (a regex that matched
# nothing would pass silently) and that a missing path is reported.
. "$(dirname "$0")/lib.sh"
ROOT=$(cd "$HERE/../.." && pwd)
DOC=$ROOT/docs/extending.md

# the paths of a markdown file, one a line, trailing punctuation removed
paths_of() {
  grep -oE '(^|[^A-Za-z0-9_./-])(src|tests|docs|include|tools|bench|fuzz|scripts)/[A-Za-z0-9_./<>*{},-]+' "$1" |
    sed -E 's/^[^a-z]//; s/[.,:;)]+$//' | grep -v '[<>*{}]' | sort -u
}

# the same for paths written from a layer folder of src/ (core/, cpu/, model/, ...)
src_paths_of() {
  grep -oE '(^|[^A-Za-z0-9_./-])(core|quant|backend|alloc|ref|cpu|cuda|gguf|vocab|sampling|model|api|chat|common|server|train)/[A-Za-z0-9_./<>*{},-]+' "$1" |
    sed -E 's/^[^a-z]//; s/[.,:;)]+$//' | grep -v '[<>*{}]' | sed 's|^|src/|' | sort -u
}

n=0
while read -r p; do
  n=$((n + 1))
  [ -e "$ROOT/$p" ] && ok || bad "docs/extending.md names $p, which does not exist"
done < <(paths_of "$DOC"; src_paths_of "$DOC")
[ "$n" -ge 60 ] && ok || bad "only $n paths found in docs/extending.md: the scan is broken"

# the check fails on a recipe that names a file that is gone
printf 'Edit src/core/no_such_file.c and src/core/op_rules.c.\n' >"$tmp/doc.md"
missing=0
while read -r p; do [ -e "$ROOT/$p" ] || missing=$((missing + 1)); done < <(paths_of "$tmp/doc.md")
[ "$missing" -eq 1 ] && ok || bad "a missing path was not found ($missing)"
finish
