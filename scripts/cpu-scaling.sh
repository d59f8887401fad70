#!/usr/bin/env bash
# scripts/cpu-scaling.sh [OUT_DIR] - issue 20's many-core check: lamina against
# llama.cpp on the CPU at 1 to all cores, in one run of at most 9 minutes
# (CPU_SCALING_DEADLINE; estimates for 16 cores, each step's time is in the
# log). For the device machine's host (16 cores), the one many-core machine
# within reach; anywhere else it runs the same way.
#   1. the machine: CPU model, cores, sockets and NUMA nodes, the ISA flags
#      that pick kernels (AVX-512, VNNI, BF16, AMX), read bandwidth
#      (bench_bandwidth at 1 thread and all cores);
#   2. two builds at once, all cores (~1.5-2 min): lamina (Release, CPU only,
#      build-cpu) and llama.cpp's llama-bench and llama-batched-bench from the
#      staged source (GGML_NATIVE=ON: its defaults for this machine, AMX
#      included where the CPU has it), in /tmp/cpu-scaling-llama;
#   3. TinyLlama-1.1B and Llama-7B shapes, Q4_0 (`lamina mkmodel`, ~10 s and
#      ~40 s, while llama.cpp builds; kept in CPU_SCALING_MODELS, default
#      /tmp/gpu-check-models, shared with gpu-check.sh);
#   4. thread scaling: bench/compare.py -t 1,2,4,...,all -p 512 -n 128 on
#      TinyLlama, 2 alternated rounds (~2.5 min), then `lamina bench
#      --profile` at 2 threads and at all cores (~20 s): per op, the time,
#      its share and how busy the threads were, so the two profiles say
#      where the time goes as threads are added;
#   5. the 7B shape at half and all cores, 2 rounds (~2 min);
#   6. depth: TinyLlama -d 4096 at all cores, one round each (~1 min);
#   7. parallel sequences at all cores: `lamina bench -np 1,4,8,16 -d 128`
#      against `llama-batched-bench -npl 1,4,8,16` (its S_TG), alternated
#      twice (~1 min).
# A step that would end after the deadline is skipped with a line saying
# so. Everything goes to OUT_DIR/cpu-scaling.log, the tables also to
# OUT_DIR/summary.md (default OUT_DIR: $OUT, else /tmp/cpu-scaling).
#
# Staging (on the development machine, before the device run):
# `scripts/cpu-scaling.sh --stage` packs llama.cpp's source (git archive of
# $LLAMA_SRC's HEAD, default /work/ref/llama.cpp: the parts llama-bench
# needs, ~9 MB of gzip, which every machine unpacks) into the git-ignored
# .gpu-shared with the vocabulary mkmodel reads, and notes its commit; the device run names .gpu-shared in
# its carry: run(command="bash scripts/cpu-scaling.sh $OUT",
# carry=[".gpu-shared"], timeout_s=600). The device machine has no network,
# so llama.cpp is built there from that copy (never committed here).
#
# Knobs: CPU_SCALING_DEADLINE (seconds, default 540); CPU_SCALING_THREADS
# (the thread counts, default the powers of two below the core count and
# the core count); CPU_SCALING_ROUNDS (default 2); CPU_SCALING_LAMINA=PATH
# uses that lamina (e.g. gpu-check's build-gpu/tools/lamina on the same warm
# machine: the CPU kernels are picked at run time) and skips its build;
# LLAMA_BENCH_CPU=DIR: a folder holding llama-bench and llama-batched-bench
# built for this machine (skips the llama.cpp build); CPU_SCALING_SKIP_7B=1.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
srcs="CMakeLists.txt cmake ggml src include common tools vendor app licenses LICENSE"
t0=$(date +%s)
steps_name=cpu-scaling
# shellcheck source=scripts/lib/steps.sh
. scripts/lib/steps.sh # stamp, fits, carry_over
if [ "${1:-}" = --stage ]; then
    lsrc=${LLAMA_SRC:-/work/ref/llama.cpp}
    shared=${LM_SHARED_DIR:-../shared}
    voc=models/ggml-vocab/ggml-vocab-llama-spm.gguf
    mkdir -p .gpu-shared/models/ggml-vocab || exit 1
    cp "$shared/$voc" .gpu-shared/$voc && chmod u+w .gpu-shared/$voc || exit 1
    # shellcheck disable=SC2086 # one word per path
    git -C "$lsrc" archive --format=tar HEAD $srcs | gzip -6 >.gpu-shared/llama.cpp-src.tar.gz ||
        { echo "stage: git archive of $lsrc failed"; rm -f .gpu-shared/llama.cpp-src.tar.gz; exit 1; }
    git -C "$lsrc" log -1 --format='llama.cpp %H (%cd)' --date=short >.gpu-shared/llama.cpp-src.txt
    if carry_over; then
        echo "stage: REFUSED: .gpu-shared ($shared_mib MiB) and the work tree ($tree_mib MiB)" \
            "pass 62 MiB (a run carries at most 64)"
        rm -f .gpu-shared/llama.cpp-src.tar.gz
        exit 1
    fi
    echo "stage: $(cat .gpu-shared/llama.cpp-src.txt) -> .gpu-shared/llama.cpp-src.tar.gz," \
        "$(stat -c %s .gpu-shared/llama.cpp-src.tar.gz) bytes; .gpu-shared: $(du -sh .gpu-shared | cut -f1)"
    exit 0
fi

out=${1:-${OUT:-/tmp/cpu-scaling}}
mkdir -p "$out"
out=$(cd "$out" && pwd)
exec > >(tee "$out/cpu-scaling.log") 2>&1
tee_pid=$!
bg=""
finish() {
    local rc=$?
    # shellcheck disable=SC2086 # the background jobs' pids
    [ -n "$bg" ] && kill $bg 2>/dev/null && wait $bg 2>/dev/null
    exec >&- 2>&-
    wait "$tee_pid" 2>/dev/null
    exit $rc
}
trap finish EXIT

jobs=$(nproc 2>/dev/null || echo 4)
deadline=${CPU_SCALING_DEADLINE:-540}
rounds=${CPU_SCALING_ROUNDS:-2}
models=${CPU_SCALING_MODELS:-/tmp/gpu-check-models}
threads=${CPU_SCALING_THREADS:-}
if [ -z "$threads" ]; then
    for ((t = 1; t < jobs; t *= 2)); do threads="$threads$t,"; done
    threads="$threads$jobs"
fi
half=$((jobs / 2 > 0 ? jobs / 2 : 1))
shared=${LM_SHARED_DIR:-}
if [ -z "$shared" ]; then
    if [ -d ../shared/models/ggml-vocab ]; then shared=$(cd ../shared && pwd); else shared=$PWD/.gpu-shared; fi
fi
export LM_SHARED_DIR=$shared
summary=$out/summary.md
: >"$summary"

stamp "machine"
grep -m1 'model name' /proc/cpuinfo
echo "cores: $jobs; threads measured: $threads; commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
lscpu 2>/dev/null | grep -E '^(Socket|NUMA node|Core|Thread|L2|L3)' || true
isa='avx2|avx512f|avx512bw|avx512_vnni|avx512_bf16|avx512_fp16|avx512vbmi|avx_vnni|amx_tile|amx_int8|amx_bf16'
echo "ISA flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E "^($isa)\$" | tr '\n' ' ')"
grep -m1 MemTotal /proc/meminfo

# 2. builds, at once
lbuild=/tmp/cpu-scaling-llama
llama_dir=${LLAMA_BENCH_CPU:-}
lpid=""
if [ -z "$llama_dir" ]; then
    if [ -f "$shared/llama.cpp-src.tar.gz" ] || [ -f .gpu-shared/llama.cpp-src.tar.gz ]; then
        tarball=$shared/llama.cpp-src.tar.gz
        [ -f "$tarball" ] || tarball=$PWD/.gpu-shared/llama.cpp-src.tar.gz
        cat "$(dirname "$tarball")/llama.cpp-src.txt" 2>/dev/null
        (
            rm -rf $lbuild && mkdir -p $lbuild/src && tar -xzf "$tarball" -C $lbuild/src &&
                cmake -S $lbuild/src -B $lbuild/build -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
                    -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
                    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF >$lbuild/cmake.log 2>&1 &&
                nice cmake --build $lbuild/build -j "$jobs" --target llama-bench llama-batched-bench \
                    >$lbuild/build.log 2>&1
        ) &
        lpid=$!
        bg="$bg $lpid"
        llama_dir=$lbuild/build/bin
    else
        echo "cpu-scaling: no staged llama.cpp source (scripts/cpu-scaling.sh --stage) and no LLAMA_BENCH_CPU:" \
            "lamina alone"
    fi
fi
if [ -n "${CPU_SCALING_LAMINA:-}" ]; then
    lamina=$CPU_SCALING_LAMINA
    bw=$(dirname "$(dirname "$lamina")")/bench/bench_bandwidth
    stamp "lamina build skipped: CPU_SCALING_LAMINA=$lamina"
else
    stamp "build lamina (CPU)"
    gen=()
    command -v ninja >/dev/null && gen=(-G Ninja)
    cmake -S . -B build-cpu "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DLAMINA_CUDA=OFF -DLM_SHARED_DIR="$shared" \
        >/dev/null || { echo "cpu-scaling: cmake failed"; exit 1; }
    cmake --build build-cpu -j "$jobs" --target lamina bench_bandwidth >/tmp/cpu-scaling-lamina-build.log 2>&1 ||
        { tail -30 /tmp/cpu-scaling-lamina-build.log; echo "cpu-scaling: build failed"; exit 1; }
    lamina=build-cpu/tools/lamina
    bw=build-cpu/bench/bench_bandwidth
fi

# 3. models, while llama.cpp builds
stamp "models (lamina mkmodel, Q4_0)"
mkdir -p "$models"
mk() {
    [ -f "$models/$2" ] && return 0
    "$lamina" mkmodel "$1" "$models/$2.part" --type Q4_0 --threads "$jobs" >/dev/null &&
        mv "$models/$2.part" "$models/$2" && echo "$2 written" || echo "cpu-scaling: mkmodel $1 failed"
}
tiny=$models/tinyllama-q4_0.gguf
big=$models/llama7b-q4_0.gguf
mk tinyllama-1.1b tinyllama-q4_0.gguf
[ "${CPU_SCALING_SKIP_7B:-0}" != 1 ] && mk llama-7b llama7b-q4_0.gguf

if [ -x "$bw" ]; then
    stamp "read bandwidth (bench_bandwidth 1024 MiB, 1 to $jobs threads)"
    timeout -k 5 90 "$bw" 1024 "$jobs"
fi

if [ -n "$lpid" ]; then
    stamp "waiting for the llama.cpp build"
    if wait "$lpid"; then
        echo "llama.cpp built: $(ls $lbuild/build/bin)"
    else
        echo "cpu-scaling: the llama.cpp build failed (lamina alone):"
        tail -20 $lbuild/cmake.log $lbuild/build.log 2>/dev/null
        llama_dir=""
    fi
fi
llama_bench=""
[ -n "$llama_dir" ] && [ -x "$llama_dir/llama-bench" ] && llama_bench=$llama_dir/llama-bench

# compare TITLE SECONDS compare.py-ARGS...: a table from compare.py (lamina alone without llama.cpp)
compare() {
    local title=$1 need=$2
    shift 2
    fits "$need" "$title" || return 0
    stamp "$title"
    echo "### $title" >>"$summary"
    if [ -n "$llama_bench" ]; then
        COMPARE_TIMEOUT=240 python3 bench/compare.py --llama-bench "$llama_bench" --lamina "$lamina" "$@" |
            tee -a "$summary"
    else
        local args=() model
        while [ $# -gt 1 ]; do # compare.py's options without --rounds; the model last
            if [ "$1" = --rounds ]; then shift 2; else args+=("$1"); shift; fi
        done
        model=$1
        timeout -k 5 240 "$lamina" bench -m "$model" -mmp 0 "${args[@]}" | tee -a "$summary"
    fi
}

# 4-7
[ -f "$tiny" ] && compare "TinyLlama Q4_0, threads $threads" 170 -t "$threads" -p 512 -n 128 -r 1 \
    --rounds "$rounds" "$tiny"
if [ -f "$tiny" ] && fits 40 "profiles"; then
    for t in $(printf "%s\n" 2 "$jobs" | sort -nu); do
        stamp "lamina bench --profile, TinyLlama Q4_0, $t threads"
        timeout -k 5 60 "$lamina" bench -m "$tiny" -mmp 0 -t "$t" -p 512 -n 128 -r 1 --profile
    done
fi
[ -f "$big" ] && compare "Llama-7B shape Q4_0, threads $half,$jobs" 150 -t "$half,$jobs" -p 512 -n 128 -r 1 \
    --rounds "$rounds" "$big"
[ -f "$tiny" ] && compare "TinyLlama Q4_0 at depth 4096, $jobs threads" 70 -t "$jobs" -p 512 -n 128 -d 4096 \
    -r 1 --rounds 1 "$tiny"
if [ -f "$tiny" ] && fits 70 "parallel sequences"; then
    stamp "parallel sequences, $jobs threads: lamina bench -np 1,4,8,16 -d 128, llama-batched-bench -npl 1,4,8,16"
    echo "### parallel sequences, $jobs threads (lamina's tg128 xN against llama-batched-bench's S_TG)" >>"$summary"
    for _ in 1 2; do
        timeout -k 5 60 "$lamina" bench -m "$tiny" -t "$jobs" -mmp 0 -p 0 -n 128 -d 128 -np 1,4,8,16 -r 1 |
            tee -a "$summary"
        # -c holds 16 x (128 + 128) cells: batched-bench skips a row whose sequences do not fit
        [ -x "$llama_dir/llama-batched-bench" ] &&
            timeout -k 5 60 "$llama_dir/llama-batched-bench" -m "$tiny" -t "$jobs" -c 8192 -b 2048 -ub 512 \
                -npp 128 -ntg 128 -npl 1,4,8,16 2>/dev/null | grep -E '^\|' | tee -a "$summary"
    done
fi
stamp "done"
echo "summary ($summary):"
cat "$summary"
