#!/usr/bin/env bash
# fuzz.sh - run every libFuzzer binary of a build for a bounded time.
#
# Usage: scripts/fuzz.sh BUILD_DIR [SECONDS] [NAME ...]
#   BUILD_DIR  a clang build with LM_FUZZ (the default with LM_SANITIZE=ON),
#              whose `fuzzers` target has been built: BUILD_DIR/fuzz/fuzz_<name>
#   SECONDS    time per target (default 15; FUZZ_SECONDS in the Makefile)
#   NAME       only these targets (default: every fuzz_<name> binary found)
# Each target runs one process at a time, starting from its committed seed
# corpus fuzz/corpus/<name> (read-only: new inputs go to
# BUILD_DIR/fuzz-run/<name>/new, crash inputs to .../artifacts). A crash,
# sanitizer report, broken promise (abort), timeout (an input over FUZZ_TIMEOUT) or
# out-of-memory fails the run; its log and the reproducer path are printed.
# FUZZ_TIMEOUT (seconds, default 30) is the per-input limit; FUZZ_RUNS (default
# unlimited) stops a target after that many inputs, whichever comes first.
# The long campaign of docs/hostile-input.md:
#   FUZZ_TIMEOUT=1 FUZZ_RUNS=1000000 scripts/fuzz.sh build-san-clang 1800 NAME
# Without such binaries (no clang, or no libFuzzer) it says so and exits 0.
set -uo pipefail
build=${1:?usage: scripts/fuzz.sh BUILD_DIR [SECONDS] [NAME ...]}
secs=${2:-15}
timeout=${FUZZ_TIMEOUT:-30}
runs=${FUZZ_RUNS:--1}
shift $(($# >= 2 ? 2 : 1))
root=$(cd "$(dirname "$0")/.." && pwd)

bins=()
if (($#)); then
  for n in "$@"; do bins+=("$build/fuzz/fuzz_$n"); done
else
  for b in "$build"/fuzz/fuzz_*; do
    [[ -x $b && -f $b && $b != *_replay ]] && bins+=("$b")
  done
fi
if ((${#bins[@]} == 0)); then
  echo "fuzz: no libFuzzer binaries in $build/fuzz (they need clang with libFuzzer): skipping bounded fuzzing"
  exit 0
fi

failed=0
for b in "${bins[@]}"; do
  name=${b##*/fuzz_}
  work=$build/fuzz-run/$name
  rm -rf "$work"
  mkdir -p "$work/new" "$work/artifacts"
  corpus=$root/fuzz/corpus/$name
  [[ -d $corpus ]] || corpus=
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$b" -max_total_time="$secs" -timeout="$timeout" -runs="$runs" -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="$work/artifacts/" "$work/new" ${corpus:+"$corpus"} >"$work/log" 2>&1
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/log" | grep -o '[0-9]*$')
  speed=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$work/log" | grep -o '[0-9]*$')
  last=$(grep -E '^#[0-9]+' "$work/log" | tail -n 1 | grep -oE 'cov: [0-9]+ ft: [0-9]+')
  took=$(grep -o 'Done [0-9]* runs in [0-9]* second' "$work/log" | grep -oE '[0-9]+ second' | grep -oE '[0-9]+')
  if ((rc == 0)); then
    printf 'fuzz: %-8s ok   %ss, %s execs (%s/s), %s\n' "$name" "${took:-$secs}" "${execs:-?}" "${speed:-?}" "${last:-?}"
  else
    failed=1
    printf 'fuzz: %-8s FAILED (exit %d); log %s\n' "$name" "$rc" "$work/log"
    grep -E 'ERROR|runtime error|broken promise|Test unit written|SUMMARY' "$work/log" | head -n 20
    ls "$work/artifacts" 2>/dev/null | sed "s|^|fuzz:   reproducer: $work/artifacts/|"
  fi
done
exit $failed
