#!/usr/bin/env bash
# test_bench.sh LAMINA SHARED - `lamina bench` (docs/performance.md, "How to
# measure") on stories260K at tiny sizes, no timed assertions:
#  - -d 0,32 -np 1,2: the rows pp16, tg4, tg4 x2 and the same "@ d32", each
#    with a positive t/s, in md, csv and json (which must parse, with
#    n_depth and n_parallel right in every row);
#  - past the model's trained positions: a note, and still a result;
#  - --profile: after the results (md: stdout; csv: stderr, stdout still
#    csv) a table per test with a MUL_MAT row, time % summing to ~100;
#  - bad values (-d -1, -np 0, -np 65, a context over 2^24 tokens, -o xml,
#    --profile=1, --profile with -o xml): a message and exit 2.
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

# --profile: per-op tables after the results
"$LAMINA" bench -m "$M" -t 2 -p 16 -n 4 -r 2 --profile >"$tmp/prof.txt" 2>"$tmp/err.txt" ||
  bad "--profile exited $?: $(cat "$tmp/err.txt")"
"$LAMINA" bench -m "$M" -t 2 -p 16 -n 0 -r 1 --profile -o csv >"$tmp/prof.csv" 2>"$tmp/prof_err.txt" ||
  bad "--profile -o csv exited $?: $(cat "$tmp/prof_err.txt")"
python3 - "$tmp/prof.txt" "$tmp/prof.csv" "$tmp/prof_err.txt" <<'PY' && ok || bad "profile: $(cat "$tmp/prof.txt" "$tmp/prof_err.txt")"
import csv, sys

def tables(text):
    """{test: {op: (nodes, ms, time %)}} of the 'profile:' blocks."""
    out, cur = {}, None
    for line in text.splitlines():
        if line.startswith("profile: "):
            cur = out.setdefault(line.split(", ")[-1].split(":")[0], {})
        elif cur is not None and line.startswith("| ") and not line.startswith(("| op ", "| --")):
            c = [x.strip() for x in line.strip("|").split("|")]
            cur[c[0]] = (c[1], float(c[2]), float(c[3]))
    return out

md = open(sys.argv[1]).read()
assert md.index("| llama") < md.index("profile: "), "tables come after the results"
assert sum(l.startswith("| llama") for l in md.splitlines()) == 2
for text, tests in ((md, ["pp16", "tg4"]), (open(sys.argv[3]).read(), ["pp16"])):
    t = tables(text)
    assert sorted(t) == sorted(tests), t
    for name, rows in t.items():
        assert int(rows["MUL_MAT"][0]) > 0 and rows["MUL_MAT"][1] > 0, rows
        assert "outside the graph executor" in rows, rows
        total = sum(r[2] for r in rows.values())
        assert abs(total - 100) <= 0.1 * len(rows), (name, total)
rows = list(csv.DictReader(open(sys.argv[2])))
assert len(rows) == 1 and float(rows[0]["avg_ts"]) > 0, rows
PY

# bad values: a message and exit 2
for args in "-d -1" "-np 0" "-np 65" "-d 1048576 -np 64" "-d 1,x" "-o xml" "--profile=1" "--profile -o xml"; do
  # shellcheck disable=SC2086
  "$LAMINA" bench -m "$M" -t 1 -p 16 -n 4 -r 1 $args >"$tmp/o.txt" 2>"$tmp/e.txt"
  s=$?
  [ $s -eq 2 ] && grep -q "error" "$tmp/e.txt" && [ ! -s "$tmp/o.txt" ] && ok ||
    bad "bench $args: exit $s, '$(cat "$tmp/e.txt")'"
done
"$LAMINA" bench --help | grep -q -- "--parallel" && ok || bad "--help has no --parallel"
"$LAMINA" bench --help | grep -q -- "--profile" && ok || bad "--help has no --profile"
finish
