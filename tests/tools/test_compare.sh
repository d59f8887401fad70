#!/usr/bin/env bash
# test_compare.sh LAMINA SHARED - bench/compare.py's table (docs/performance.md)
# on stories260K at tiny sizes, with `lamina bench` standing in for
# llama-bench (a wrapper: the same JSON records), no timed assertions:
#  - -t 1: the table without a threads column, a pp16 and a tg4 row, each
#    with two positive t/s and their ratio;
#  - -p 0: the tg row alone (no row for the test not run);
#  - -t 1,2 and -d 0,8: a threads column, the 8 rows in thread order, each
#    ratio the two t/s' quotient (to the rounding of the printed values);
#  - an engine that fails: its column reads "failed", the run still ends 0;
#  - -t 0, -t 1,x: a message and exit 2 (argparse).
. "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 0; }
ROOT=$(cd "$HERE/../.." && pwd)
M=$SHARED/models/stories260K.gguf
printf '#!/usr/bin/env bash\nexec %q bench "$@"\n' "$LAMINA" >"$tmp/llama-bench"
printf '#!/usr/bin/env bash\necho "no such model" >&2; exit 1\n' >"$tmp/broken"
chmod +x "$tmp/llama-bench" "$tmp/broken"
C=(python3 "$ROOT/bench/compare.py" --lamina "$LAMINA" -p 16 -n 4 -r 1 --rounds 1)

# check_table FILE HEADER ROWS...: the header line, then exactly these "threads|test" rows with
# ratios matching their t/s (threads empty: no threads column)
check_table() {
  python3 - "$@" <<'PY'
import sys
path, header, want = sys.argv[1], sys.argv[2], sys.argv[3:]
lines = [l for l in open(path).read().splitlines() if l.startswith("|")]
assert lines[0] == header, (lines[0], header)
rows = [[c.strip() for c in l.strip("|").split("|")] for l in lines[2:]]
assert len(rows) == len(want), (rows, want)
for r, w in zip(rows, want):
    threads, test = w.split("|")
    cells = r[2:] if not threads else r[3:]
    if threads:
        assert r[2] == threads, (r, w)
    assert cells[0] == test, (r, w)
    a, b = float(cells[1]), float(cells[2])
    assert a > 0 and b > 0, r
    # the ratio of the unrounded t/s: within the rounding of the printed ones (0.005 each)
    ratio = float(cells[3].rstrip("x"))
    lo, hi = (b - 0.005) / (a + 0.005), (b + 0.005) / max(a - 0.005, 1e-9)
    assert lo - 0.005 <= ratio <= hi + 0.005, (r, lo, hi)
PY
}

H1="| model file | type | test | llama.cpp t/s | lamina t/s | lamina / llama.cpp | tg bound t/s |"
"${C[@]}" --llama-bench "$tmp/llama-bench" -t 1 "$M" >"$tmp/t1.md" 2>"$tmp/err.txt" ||
  bad "-t 1 exited $?: $(cat "$tmp/err.txt")"
check_table "$tmp/t1.md" "$H1" "|pp16" "|tg4" && ok || bad "-t 1 table: $(cat "$tmp/t1.md")"

H2="| model file | type | threads | test | llama.cpp t/s | lamina t/s | lamina / llama.cpp | tg bound t/s |"
"${C[@]}" --llama-bench "$tmp/llama-bench" -t 1,2 -d 0,8 "$M" >"$tmp/t12.md" 2>"$tmp/err.txt" ||
  bad "-t 1,2 exited $?: $(cat "$tmp/err.txt")"
check_table "$tmp/t12.md" "$H2" "1|pp16" "1|tg4" "1|pp16 @ d8" "1|tg4 @ d8" \
  "2|pp16" "2|tg4" "2|pp16 @ d8" "2|tg4 @ d8" && ok || bad "-t 1,2 table: $(cat "$tmp/t12.md")"
grep -q "round 1, lamina: .*pp16 t2 [0-9.]* t/s" "$tmp/err.txt" && ok ||
  bad "no per-thread round line: $(cat "$tmp/err.txt")"

"${C[@]}" --llama-bench "$tmp/llama-bench" -t 1 -p 0 "$M" >"$tmp/p0.md" 2>"$tmp/err.txt" ||
  bad "-p 0 exited $?: $(cat "$tmp/err.txt")"
check_table "$tmp/p0.md" "$H1" "|tg4" && ok || bad "-p 0 table (no pp row): $(cat "$tmp/p0.md")"

"${C[@]}" --llama-bench "$tmp/broken" -t 1 "$M" >"$tmp/broken.md" 2>"$tmp/err.txt" ||
  bad "a failing engine ended the run: $?"
grep -q "^| stories260K.gguf | .* | pp16 | failed | [0-9.]* | - |" "$tmp/broken.md" && ok ||
  bad "failed engine row: $(cat "$tmp/broken.md")"
grep -q "no such model" "$tmp/err.txt" && ok || bad "the failing engine's stderr not shown: $(cat "$tmp/err.txt")"

for t in 0 1,x ""; do
  "${C[@]}" --llama-bench "$tmp/llama-bench" -t "$t" "$M" >/dev/null 2>"$tmp/err.txt"
  rc=$?
  [ $rc = 2 ] && grep -q "thread counts" "$tmp/err.txt" && ok || bad "-t '$t': exit $rc, $(cat "$tmp/err.txt")"
done
finish
