#!/usr/bin/env bash
# test_format.sh LAMINA SHARED - .clang-format is enforced on changed lines:
# every line of a C file (src/, tests/, tools/, bench/, fuzz/) added or changed
# since the commit named in .clang-format-base is as clang-format writes it.
# `git clang-format BASE` formats exactly those lines. Skips (and says so)
# outside a git checkout, where the base commit is not in the clone, or
# without clang-format / git-clang-format (scripts/deps.sh installs them).
# Also checks that a planted misformatted line is found.
. "$(dirname "$0")/lib.sh"
ROOT=$(cd "$HERE/../.." && pwd)
if ! command -v git-clang-format >/dev/null 2>&1 || ! command -v clang-format >/dev/null 2>&1; then
  echo "SKIP: clang-format or git-clang-format not installed"
  exit 0
fi
base=$(head -n 1 "$ROOT/.clang-format-base")
if ! git -C "$ROOT" rev-parse -q --verify "$base^{commit}" >/dev/null 2>&1; then
  echo "SKIP: not a git checkout, or the base commit $base is not in this clone"
  exit 0
fi
DIRS=(src tests tools bench fuzz)
out=$(cd "$ROOT" && git clang-format --diff --extensions c,h "$base" -- "${DIRS[@]}" 2>&1)
if grep -q '^diff ' <<<"$out"; then
  bad "lines changed since $base are not clang-format clean (run: git clang-format $base):"
  echo "$out" | head -n 60 >&2
else
  ok
fi

# the check sees a misformatted line: a scratch clone with one bad line
git clone -q --shared "$ROOT" "$tmp/clone" 2>/dev/null && cp "$ROOT/.clang-format" "$tmp/clone/" &&
  printf 'int lm_format_probe( int a ){return a;}\n' >>"$tmp/clone/src/core/empty.c" &&
  out=$(cd "$tmp/clone" && git clang-format --diff --extensions c,h "$base" -- src 2>&1) &&
  grep -q 'lm_format_probe' <<<"$out" && ok || bad "a planted misformatted line was not reported"
finish
