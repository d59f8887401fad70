#!/usr/bin/env bash
# test_bench.sh LAMINA SHARED - `lamina bench` (docs/performance.md, "How to
# measure") on stories260K at tiny sizes, no timed assertions:
#  - -d 0,32 -np 1,2: the rows pp16, tg4, tg4 x2 and the same "@ d32", each
#    with a positive t/s, in md, csv and json (which must parse, with
#    n_depth and n_parallel right in every row);
#  - past the model's trained positions: a note, and still a result;
#  - bad values (-d -1, -np 0, -np 65, a context over 2^24 tokens, -o xml):
#    a message and exit 2.
. "$(dirname "$0")/lib.sh"
M=$SHARED/models/stories260K.gguf
B=("$LAMINA" bench -m "$M" -t 1 -p 16 -n 4 -d 0,32 -np 1,2 -r 2)

"${B[@]}" >"$tmp/md.txt" 2>"$tmp/err.txt" || bad "bench exited $?: $(cat "$tmp/err.txt")"
for t in "pp16" "tg4" "tg4 x2" "pp16 @ d32" "tg4 @ d32" "tg4 x2 @ d32"; do
  grep -Eq "\| +$t \| +[0-9]*[1-9][0-9]*\.[0-9]+ ± +[0-9.]+ \|$" "$tmp/md.txt" && ok ||
    bad "no row '$t' with a positive t/s: $(cat "$tmp/md.txt")"
done
[ "$(grep -c '^| llama' "$tmp/md.txt")" -eq 6 ] && ok || bad "not 6 rows: $(cat "$tmp/md.txt")"

"${B[@]}" -o csv >"$tmp/out.csv" 2>/dev/null || bad "csv exited $?"
"${B[@]}" -o json >"$tmp/out.json" 2>/dev/null || bad "json exited $?"
python3 - "$tmp/out.csv" "$tmp/out.json" <<'PY' && ok || bad "csv/json: $(cat "$tmp/out.csv" "$tmp/out.json")"
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
js = json.load(open(sys.argv[2]))
want = [(16, 0, 0, 1), (0, 4, 0, 1), (0, 4, 0, 2), (16, 0, 32, 1), (0, 4, 32, 1), (0, 4, 32, 2)]
for got in (rows, js):
    assert len(got) == 6, got
    for r, w in zip(got, want):
        key = tuple(int(r[k]) for k in ("n_prompt", "n_gen", "n_depth", "n_parallel"))
        assert key == w, (key, w)
        assert float(r["avg_ts"]) > 0 and float(r["stddev_ts"]) >= 0, r
        assert int(r["n_threads"]) == 1 and r["backend"] == "CPU", r
PY

# past the trained positions (2048): timing only, with a note
"$LAMINA" bench -m "$M" -t 1 -p 4 -n 0 -d 2048 -r 1 >"$tmp/deep.txt" 2>"$tmp/err.txt" || bad "deep exited $?"
grep -q "trained positions" "$tmp/err.txt" && ok || bad "no note past n_ctx_train: $(cat "$tmp/err.txt")"
grep -q "pp4 @ d2048 " "$tmp/deep.txt" && ok || bad "no deep row: $(cat "$tmp/deep.txt")"

# bad values: a message and exit 2
for args in "-d -1" "-np 0" "-np 65" "-d 1048576 -np 64" "-d 1,x" "-o xml"; do
  # shellcheck disable=SC2086
  "$LAMINA" bench -m "$M" -t 1 -p 16 -n 4 -r 1 $args >"$tmp/o.txt" 2>"$tmp/e.txt"
  s=$?
  [ $s -eq 2 ] && grep -q "error" "$tmp/e.txt" && [ ! -s "$tmp/o.txt" ] && ok ||
    bad "bench $args: exit $s, '$(cat "$tmp/e.txt")'"
done
"$LAMINA" bench --help | grep -q -- "--parallel" && ok || bad "--help has no --parallel"
finish
