#!/usr/bin/env bash
# scripts/gpu-check.sh [OUT_DIR] - the CUDA backend's check on a GPU machine
# (issue 16), in one run of at most 6 minutes on 16 cores (GPU_CHECK_DEADLINE;
# each step's time is in the log; estimates from sm_90 compiles and mkmodel
# runs on 2 cores):
#   1. the machine: nvidia-smi's GPU, driver, clocks (~1 s);
#   2. build lamina with the CUDA backend for this machine's GPU (Ninja,
#      Release, CMAKE_CUDA_ARCHITECTURES from nvidia-smi) (~1.5-2.5 min);
#   3. the CUDA tests (ctest label cuda: every op on the GPU against ref,
#      whole models with layers on the GPU against their reference logits,
#      the kernels' block math on the host; liblamina.so finding the GPU
#      through its module liblamina-cuda.so) (~1 min), while `lamina mkmodel`
#      writes TinyLlama-1.1B and Llama-7B shapes (Q4_0) in the background
#      (~10 s and ~30-60 s);
#   4. lamina against llama.cpp on each of those files, alternated rounds
#      (A B A B) of `llama-bench -ngl 99 -fa 1` and `lamina bench -ngl 99`,
#      both -p 512 -n 128 -r 3 -mmp 0, best round kept (bench/compare.py, or
#      a shell fallback without python3), then one table: llama.cpp t/s,
#      lamina t/s, ratio and issue 16's target (TinyLlama tg128 >= 1.5x,
#      pp512 >= 1.0x; 7B tg128 >= 1.3x, pp512 >= 1.0x) (~30 s TinyLlama,
#      ~60 s 7B with 2 rounds); GPU clocks sampled once a second meanwhile
#      (OUT_DIR/gpu-clocks.csv). Without a llama-bench, lamina alone;
#   5. extras: TinyLlama tg128 with LAMINA_CUDA_GRAPHS=0 (decode without
#      CUDA graphs), tg128 with fused node pairs against LAMINA_NO_FUSE=1
#      (alternated twice), batched decode of 16 and 32 sequences (the MMQ kernel
#      against LAMINA_CUDA_MMQ=0, alternated twice) and TinyLlama with -ngl 0
#      as the CPU baseline (~80 s).
# Everything goes to OUT_DIR/gpu-check.log (default: $OUT, else /tmp/gpu-check).
#
# The shared models and fixtures: $LM_SHARED_DIR, else ../shared, else
# .gpu-shared in the checkout (a device machine gets only the checkout: name
# .gpu-shared, git-ignored, in the run's carry). `scripts/gpu-check.sh --stage`
# fills it here, before the device run: models/stories260K.gguf,
# models/ggml-vocab/ggml-vocab-llama-spm.gguf and fixtures/arch/ from ../shared,
# and llama.cpp's llama-bench ($LLAMA_BENCH, default
# /work/ref/llama.cpp/build-cuda/bin/llama-bench: a CUDA build made outside
# this repository, never committed) as .gpu-shared/llama.cpp/llama-bench,
# stripped, refused when it and the work tree would pass 62 MiB (the carry limit is 64).
# The device side runs it with the CUDA libraries of /usr/local/cuda on
# LD_LIBRARY_PATH ($LLAMA_BENCH there overrides the staged one).
#
# Knobs: GPU_CHECK_SKIP_BENCH=1 skips steps 4-5; GPU_CHECK_SKIP_7B=1 the 7B
# shape; GPU_CHECK_SKIP_EXTRAS=1 step 5; GPU_CHECK_SKIP_TESTS=1 the tests (and
# their build); GPU_CHECK_ROUNDS (default 2) A/B rounds per model;
# GPU_CHECK_DEADLINE (seconds from the start, default 360): a bench step that
# would end after it is skipped, with a line saying so; GPU_CHECK_LAMINA=PATH
# uses that lamina and skips the build and the tests (a dry run on a machine
# without a GPU, with a fake nvidia-smi on PATH); GPU_CHECK_MODELS (default
# /tmp/gpu-check-models): where the model files are made (existing ones kept);
# GPU_CHECK_SHELL_COMPARE=1: the shell's comparison even where python3 exists.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
cudalibs=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib
t0=$(date +%s)
steps_name=gpu-check
# shellcheck source=scripts/lib/steps.sh
. scripts/lib/steps.sh # stamp, fits, carry_over
if [ "${1:-}" = --stage ]; then
    src=${LM_SHARED_DIR:-../shared}
    for f in models/stories260K.gguf models/ggml-vocab/ggml-vocab-llama-spm.gguf fixtures/arch; do
        mkdir -p ".gpu-shared/$(dirname $f)" && cp -r "$src/$f" ".gpu-shared/$(dirname $f)/" || exit 1
    done
    chmod -R u+w .gpu-shared # ../shared is read-only: a later --stage must be able to overwrite the copies
    lb=${LLAMA_BENCH:-/work/ref/llama.cpp/build-cuda/bin/llama-bench}
    dst=.gpu-shared/llama.cpp/llama-bench
    rm -rf .gpu-shared/llama.cpp
    if [ -f "$lb" ]; then
        mkdir -p .gpu-shared/llama.cpp && cp "$lb" $dst && chmod +x $dst || exit 1
        if strip -o $dst.stripped $dst 2>/dev/null && [ "$(stat -c %s $dst.stripped)" -lt "$(stat -c %s $dst)" ]; then
            mv $dst.stripped $dst
            echo "stage: llama-bench stripped"
        fi
        rm -f $dst.stripped
        if carry_over; then
            echo "stage: REFUSED: with llama-bench ($(du -h $dst | cut -f1)) .gpu-shared would be" \
                "$shared_mib MiB; with the work tree's $tree_mib MiB that passes 62 MiB" \
                "(a run carries at most 64 MiB): build llama-bench" \
                "for one sm (CMAKE_CUDA_ARCHITECTURES=90a), GGML_CUDA_COMPRESSION_MODE=size; not staged"
            rm -rf .gpu-shared/llama.cpp
            exit 1
        fi
        echo "stage: $lb -> $dst, $(stat -c %s $dst) bytes ($(du -h $dst | cut -f1))"
        echo "stage: its shared libraries (ldd; the device puts $cudalibs first on LD_LIBRARY_PATH," \
            "libcuda.so.1 comes with its driver):"
        LD_LIBRARY_PATH=$cudalibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ldd $dst 2>&1 | sed 's/^/    /'
    else
        echo "stage: no llama-bench at $lb (set LLAMA_BENCH=...): the device run will bench lamina alone"
    fi
    du -sh .gpu-shared
    exit 0
fi
out=${1:-${OUT:-/tmp/gpu-check}}
mkdir -p "$out"
out=$(cd "$out" && pwd)
log=$out/gpu-check.log
exec > >(tee "$log") 2>&1
tee_pid=$!
mk_pid=""
clocks_pid=""
# at exit: stop the background jobs (one left behind would hold the log's pipe open), close our ends
# of the pipe and let tee write the log's last lines before the run ends
finish() {
    local rc=$?
    [ -n "$mk_pid" ] && kill "$mk_pid" 2>/dev/null && wait "$mk_pid" 2>/dev/null
    [ -n "$clocks_pid" ] && kill "$clocks_pid" 2>/dev/null && wait "$clocks_pid" 2>/dev/null
    exec >&- 2>&-
    wait "$tee_pid" 2>/dev/null
    exit $rc
}
trap finish EXIT

shared=${LM_SHARED_DIR:-}
if [ -z "$shared" ]; then
    if [ -f ../shared/models/stories260K.gguf ]; then shared=$(cd ../shared && pwd); else shared=$PWD/.gpu-shared; fi
fi
[ -f "$shared/models/stories260K.gguf" ] && [ -d "$shared/fixtures/arch" ] || {
    echo "gpu-check: no shared models and fixtures at $shared: run scripts/gpu-check.sh --stage here and name" \
        ".gpu-shared in the device run's carry (or set LM_SHARED_DIR)"
    exit 1
}
jobs=$(nproc 2>/dev/null || echo 4)
build="build-gpu"
rounds=${GPU_CHECK_ROUNDS:-2}
deadline=${GPU_CHECK_DEADLINE:-360}
models=${GPU_CHECK_MODELS:-/tmp/gpu-check-models}

stamp "machine"
nvidia-smi -L || { echo "gpu-check: no nvidia-smi: not a GPU machine"; exit 1; }
nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap,pstate,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,power.limit \
    --format=csv || true
grep -m1 'model name' /proc/cpuinfo
echo "cores: $jobs; shared: $shared; commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')
[ -n "$cap" ] || cap=90

tests_rc=0
tests=skipped
if [ -n "${GPU_CHECK_LAMINA:-}" ]; then
    lamina=$GPU_CHECK_LAMINA
    stamp "build and tests skipped: GPU_CHECK_LAMINA=$lamina"
else
    lamina=$build/tools/lamina
    stamp "build (sm_$cap)"
    gen=()
    command -v ninja >/dev/null && gen=(-G Ninja)
    cmake -S . -B $build "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DLAMINA_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$cap" \
        -DLM_SHARED_DIR="$shared" >/dev/null || { echo "gpu-check: cmake failed"; exit 1; }
    cat $build/cuda-status.txt
    targets="lamina"
    if [ "${GPU_CHECK_SKIP_TESTS:-0}" != 1 ]; then
        targets="$targets test_cuda_ops test_cuda_model lamina_cuda test_modules local_host"
        for f in tests/cuda/test_cuda_host_*.cu; do [ -f "$f" ] && targets="$targets $(basename "$f" .cu)"; done
    fi
    # shellcheck disable=SC2086 # one word per target
    cmake --build $build -j "$jobs" --target $targets || { echo "gpu-check: build failed"; exit 1; }
fi

# The benchmark models, made in the background while the tests run (CPU only).
bench=0
[ "${GPU_CHECK_SKIP_BENCH:-0}" != 1 ] && bench=1
want7b=0
[ "${GPU_CHECK_SKIP_7B:-0}" != 1 ] && want7b=1
export LM_SHARED_DIR="$shared"
if [ $bench = 1 ]; then
    mkdir -p "$models"
    (
        c=""
        trap '[ -n "$c" ] && kill "$c" 2>/dev/null; exit 1' TERM
        s=$(date +%s)
        # mk PRESET NAME: $models/NAME written through NAME.part, unless it exists
        mk() {
            [ -f "$models/$2" ] && return 0
            nice "$lamina" mkmodel "$1" "$models/$2.part" --type Q4_0 --threads "$jobs" >/dev/null &
            c=$!
            wait $c && mv "$models/$2.part" "$models/$2" && echo "gpu-check: $2 written, $(($(date +%s) - s)) s" ||
                echo "gpu-check: mkmodel $1 failed"
        }
        mk tinyllama-1.1b tinyllama-q4_0.gguf
        [ $want7b = 1 ] && mk llama-7b llama7b-q4_0.gguf
    ) &
    mk_pid=$!
fi

if [ -z "${GPU_CHECK_LAMINA:-}" ] && [ "${GPU_CHECK_SKIP_TESTS:-0}" != 1 ]; then
    stamp "CUDA tests"
    # the GPU tests' own TIMEOUT property (600 s) wins over --timeout: cap the whole step instead
    (cd $build && timeout -k 10 240 ctest -L cuda --output-on-failure --timeout 180)
    tests_rc=$?
    # liblamina.so finds the GPU through its module liblamina-cuda.so (docs/architecture.md "Backend modules")
    (cd $build && LAMINA_TEST_EXPECT_CUDA=1 timeout -k 10 120 ctest -R '^modules/' --output-on-failure) || tests_rc=1
    tests=$([ $tests_rc = 0 ] && echo passed || echo FAILED)
fi

# add_targets PP TG: compare.py's table rows on stdin -> summary rows with the target and whether it is met
add_targets() {
    awk -F'|' -v pp="$1" -v tg="$2" '
        function trim(s) { gsub(/^ +| +$/, "", s); return s }
        /^\| / && $2 !~ /model file/ {
            test = trim($4); ratio = trim($7); sub(/x$/, "", ratio)
            target = test ~ /^pp/ ? pp : test ~ /^tg/ ? tg : ""
            met = (target == "" || ratio == "-") ? "-" : (ratio + 0 >= target + 0 ? "yes" : "NO")
            printf "| %s | %s | %s | %s | %s | %s | %s |\n", trim($2), test, trim($5), trim($6), trim($7),
                target == "" ? "-" : ">= " target "x", met
        }'
}

# md_ts FILE: "test t/s" per row of a llama-bench/lamina bench markdown table
md_ts() {
    awk -F'|' '
        function trim(s) { gsub(/^ +| +$/, "", s); return s }
        /^\|/ && !tc { for (i = 2; i < NF; i++) { h = trim($i); if (h == "test") tc = i; if (h == "t/s") vc = i }; next }
        /^\| *[-:]+ *\|/ { next }
        /^\|/ && tc && vc { split(trim($vc), v, " "); print trim($tc), v[1] }' "$1"
}

# shell_compare MODEL: compare.py's table without python3 (and lamina alone without llama-bench)
shell_compare() {
    local model=$1 r tmp=/tmp/gpu-check-cmp llama=$llama_bench
    : >$tmp.llama
    : >$tmp.lamina
    for r in $(seq "$rounds"); do
        if [ -n "$llama" ]; then
            if timeout -k 5 150 "$llama" -m "$model" -t "$jobs" -p 512 -n 128 -r 3 -mmp 0 -ngl 99 -fa 1 -o md >$tmp.out 2>$tmp.err; then
                [ "$r" = 1 ] && grep -m1 '^build:' $tmp.out | sed 's/^/llama-bench /'
                md_ts $tmp.out | sed "s/^/$r /" | tee -a $tmp.llama | sed "s/^$r /round $r, llama.cpp: /" >&2
            else
                echo "llama-bench failed (left out of the later rounds):"; tail -20 $tmp.err
                llama=""
            fi
        fi
        if timeout -k 5 150 "$lamina" bench -m "$model" -t "$jobs" -p 512 -n 128 -r 3 -mmp 0 -ngl 99 -o md >$tmp.out 2>$tmp.err; then
            md_ts $tmp.out | sed "s/^/$r /" | tee -a $tmp.lamina | sed "s/^$r /round $r, lamina: /" >&2
        else
            echo "lamina bench failed:"; tail -20 $tmp.err
        fi
    done
    echo "| model file | type | test | llama.cpp t/s | lamina t/s | lamina / llama.cpp | tg bound t/s |"
    echo "|---|---|---|---:|---:|---:|---:|"
    awk -v f="$(basename "$model")" -v have="${llama_bench:+1}" '
        { e = FILENAME == ARGV[1] ? 1 : 2; if ($3 + 0 > best[e, $2] + 0) best[e, $2] = $3 }
        END {
            n = split("pp512 tg128", t, " ")
            for (i = 1; i <= n; i++) {
                a = best[1, t[i]]; b = best[2, t[i]]
                printf "| %s | - | %s | %s | %s | %s | |\n", f, t[i], a ? a : (have ? "failed" : "not run"),
                    b ? b : "failed", a && b ? sprintf("%.2fx", b / a) : "-"
            }
        }' $tmp.llama $tmp.lamina
}

# compare MODEL NAME PP_TARGET TG_TARGET
compare() {
    local model=$1 tmp=/tmp/gpu-check-cmp.md
    stamp "bench: $2, llama.cpp (-ngl 99 -fa 1) against lamina (-ngl 99), $rounds alternated rounds"
    if [ -n "$llama_bench" ] && command -v python3 >/dev/null && [ "${GPU_CHECK_SHELL_COMPARE:-0}" != 1 ]; then
        COMPARE_TIMEOUT=150 python3 bench/compare.py --llama-bench "$llama_bench" --lamina "$lamina" -t "$jobs" -p 512 -n 128 -r 3 \
            --rounds "$rounds" -ngl 99 --llama-args "-fa 1" "$model" >$tmp
    else
        shell_compare "$model" >$tmp
    fi
    cat $tmp
    add_targets "$3" "$4" <$tmp >>"$out/summary.md"
}

if [ $bench = 1 ]; then
    stamp "bench setup"
    llama_bench=${LLAMA_BENCH:-}
    if [ -z "$llama_bench" ]; then
        for f in "$shared/llama.cpp/llama-bench" "$PWD/.gpu-shared/llama.cpp/llama-bench"; do
            [ -f "$f" ] && { llama_bench=$f; break; }
        done
    fi
    if [ -n "$llama_bench" ]; then
        # The staged binary behind a wrapper that gives it CUDA's libraries (lamina keeps its own environment).
        mkdir -p /tmp/gpu-check-llama
        cp "$llama_bench" /tmp/gpu-check-llama/llama-bench.bin && chmod +x /tmp/gpu-check-llama/llama-bench.bin
        # shellcheck disable=SC2016 # expanded by the wrapper
        printf '#!/usr/bin/env bash\nLD_LIBRARY_PATH=%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} exec %s "$@"\n' \
            "$cudalibs" /tmp/gpu-check-llama/llama-bench.bin >/tmp/gpu-check-llama/llama-bench
        chmod +x /tmp/gpu-check-llama/llama-bench
        echo "llama-bench: $llama_bench ($(stat -c %s "$llama_bench") bytes); its devices:"
        if ! timeout 60 /tmp/gpu-check-llama/llama-bench --list-devices; then
            echo "gpu-check: llama-bench does not run here (lamina alone); ldd:"
            LD_LIBRARY_PATH=$cudalibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ldd /tmp/gpu-check-llama/llama-bench.bin
            llama_bench=""
        else
            llama_bench=/tmp/gpu-check-llama/llama-bench
        fi
    else
        echo "gpu-check: no llama-bench staged (scripts/gpu-check.sh --stage, or LLAMA_BENCH=...): lamina alone"
    fi
    command -v python3 >/dev/null && echo "python3: $(python3 --version 2>&1)" || echo "no python3: the shell's comparison"
    nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu \
        --format=csv -lms 1000 >"$out/gpu-clocks.csv" 2>/dev/null &
    clocks_pid=$!
    echo "| model file | test | llama.cpp t/s (best) | lamina t/s (best) | lamina / llama.cpp | target | met |" >"$out/summary.md"
    echo "|---|---|---:|---:|---:|---|---|" >>"$out/summary.md"

    stamp "waiting for the model files"
    while [ -n "$mk_pid" ] && [ ! -f "$models/tinyllama-q4_0.gguf" ] && kill -0 "$mk_pid" 2>/dev/null; do
        sleep 1
    done
    if [ -f "$models/tinyllama-q4_0.gguf" ]; then
        fits $((10 + 15 * rounds)) "TinyLlama comparison" && compare "$models/tinyllama-q4_0.gguf" "TinyLlama-1.1B Q4_0" 1.0 1.5
    else
        echo "gpu-check: no TinyLlama file"
    fi
    if [ $want7b = 1 ] && fits $((15 + 30 * rounds)) "Llama-7B comparison"; then
        # the 7B file is still being written: wait for it no longer than the deadline allows
        while [ -n "$mk_pid" ] && kill -0 "$mk_pid" 2>/dev/null && fits $((15 + 30 * rounds)) "Llama-7B file"; do
            sleep 2
        done
        if [ -n "$mk_pid" ] && kill -0 "$mk_pid" 2>/dev/null; then
            kill "$mk_pid" 2>/dev/null
            rm -f "$models/llama7b-q4_0.gguf"
        fi
        [ -n "$mk_pid" ] && wait "$mk_pid" 2>/dev/null
        mk_pid=""
        if [ -f "$models/llama7b-q4_0.gguf" ]; then
            fits $((15 + 30 * rounds)) "Llama-7B comparison" && compare "$models/llama7b-q4_0.gguf" "Llama-7B Q4_0" 1.0 1.3
        else
            echo "gpu-check: no Llama-7B file"
        fi
    fi
    stamp "summary (best of $rounds rounds; issue 16's targets)"
    cat "$out/summary.md"

    if [ "${GPU_CHECK_SKIP_EXTRAS:-0}" != 1 ] && [ -f "$models/tinyllama-q4_0.gguf" ]; then
        if fits 15 "tg without CUDA graphs"; then
            stamp "bench: TinyLlama Q4_0, GPU tg without CUDA graphs (LAMINA_CUDA_GRAPHS=0; compare with tg128 above)"
            LAMINA_CUDA_GRAPHS=0 timeout -k 5 60 "$lamina" bench -m "$models/tinyllama-q4_0.gguf" -ngl 99 -mmp 0 -p 0 -n 128 -r 3
        fi
        if fits 25 "tg without fused pairs"; then
            stamp "bench: TinyLlama Q4_0, GPU tg128 with fused node pairs (default) and LAMINA_NO_FUSE=1, twice"
            for r in 1 2; do
                timeout -k 5 60 "$lamina" bench -m "$models/tinyllama-q4_0.gguf" -ngl 99 -mmp 0 -p 0 -n 128 -r 3
                LAMINA_NO_FUSE=1 timeout -k 5 60 "$lamina" bench -m "$models/tinyllama-q4_0.gguf" -ngl 99 -mmp 0 -p 0 \
                    -n 128 -r 3
            done
        fi
        if fits 40 "batched decode"; then
            stamp "bench: TinyLlama Q4_0, GPU batched decode (-np 16,32): the MMQ kernel in captured graphs, then" \
                "LAMINA_CUDA_MMQ=0 (dequantized weights for cuBLAS, no graphs), twice"
            for r in 1 2; do
                timeout -k 5 60 "$lamina" bench -m "$models/tinyllama-q4_0.gguf" -ngl 99 -mmp 0 -p 0 -n 64 -d 128 -np 16,32 -r 2
                LAMINA_CUDA_MMQ=0 timeout -k 5 60 "$lamina" bench -m "$models/tinyllama-q4_0.gguf" -ngl 99 -mmp 0 -p 0 -n 64 \
                    -d 128 -np 16,32 -r 2
            done
        fi
        if fits 30 "CPU baseline"; then
            stamp "bench: TinyLlama Q4_0, CPU (-ngl 0, $jobs threads)"
            timeout -k 5 90 "$lamina" bench -m "$models/tinyllama-q4_0.gguf" -ngl 0 -mmp 0 -t "$jobs" -p 512 -n 128 -r 1
        fi
    fi
    if [ -n "$clocks_pid" ]; then
        kill "$clocks_pid" 2>/dev/null
        wait "$clocks_pid" 2>/dev/null
        clocks_pid=""
        echo "GPU clocks during the benches (MHz, $out/gpu-clocks.csv):"
        awk -F', ' 'NR > 1 && $2 + 0 > 0 { n++; s = $2 + 0; if (!lo || s < lo) lo = s; if (s > hi) hi = s; m = $3 + 0 }
            END { if (n) printf "  sm %d-%d, mem %d (%d samples)\n", lo, hi, m, n }' "$out/gpu-clocks.csv"
    fi
fi
stamp "done (CUDA tests: $tests)"
exit $tests_rc
