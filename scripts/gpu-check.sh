#!/usr/bin/env bash
# scripts/gpu-check.sh [OUT_DIR] - the CUDA backend's check on a GPU machine
# (issue 16), in one run that fits in about 6 minutes on 16 cores:
#   1. build lamina with the CUDA backend for this machine's GPU (Ninja,
#      Release, CMAKE_CUDA_ARCHITECTURES from nvidia-smi);
#   2. the CUDA tests (ctest label cuda: every op on the GPU against ref,
#      whole models with layers on the GPU against their reference logits,
#      the kernels' block math on the host);
#   3. `lamina bench -ngl 99` (pp512, tg128) on TinyLlama-1.1B and Llama-7B
#      shapes from `lamina mkmodel` (Q4_0), TinyLlama's tg128 once more with
#      LAMINA_CUDA_GRAPHS=0 (decode without CUDA graphs), and TinyLlama with
#      -ngl 0 as the CPU baseline of the same machine.
# Everything goes to OUT_DIR/gpu-check.log (default: $OUT, else /tmp/gpu-check).
#
# The shared models and fixtures: $LM_SHARED_DIR, else ../shared, else
# .gpu-shared in the checkout (a device machine gets only the checkout: copy
# models/stories260K.gguf, models/ggml-vocab/ggml-vocab-llama-spm.gguf and
# fixtures/arch/ there, keeping the folders, and name it in the run's carry;
# .gpu-shared is git-ignored; `scripts/gpu-check.sh --stage` does that copy
# from ../shared, here, before the device run). GPU_CHECK_SKIP_BENCH=1 skips
# step 3, GPU_CHECK_SKIP_7B=1 only the 7B shape.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --stage ]; then
    src=${LM_SHARED_DIR:-../shared}
    for f in models/stories260K.gguf models/ggml-vocab/ggml-vocab-llama-spm.gguf fixtures/arch; do
        mkdir -p ".gpu-shared/$(dirname $f)" && cp -r "$src/$f" ".gpu-shared/$(dirname $f)/" || exit 1
    done
    du -sh .gpu-shared
    exit 0
fi
out=${1:-${OUT:-/tmp/gpu-check}}
mkdir -p "$out"
log=$out/gpu-check.log
exec > >(tee "$log") 2>&1

shared=${LM_SHARED_DIR:-}
if [ -z "$shared" ]; then
    if [ -f ../shared/models/stories260K.gguf ]; then shared=$(cd ../shared && pwd); else shared=$PWD/.gpu-shared; fi
fi
jobs=$(nproc 2>/dev/null || echo 4)
build=build-gpu
t0=$(date +%s)
stamp() { echo "== $(($(date +%s) - t0)) s: $*"; }

stamp "machine"
nvidia-smi -L || { echo "gpu-check: no nvidia-smi: not a GPU machine"; exit 1; }
nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv
grep -m1 'model name' /proc/cpuinfo
echo "cores: $jobs; shared: $shared; commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')
[ -n "$cap" ] || cap=90

stamp "build (sm_$cap)"
gen=""
command -v ninja >/dev/null && gen="-G Ninja"
cmake -S . -B $build $gen -DCMAKE_BUILD_TYPE=Release -DLAMINA_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$cap" \
    -DLM_SHARED_DIR="$shared" >/dev/null || { echo "gpu-check: cmake failed"; exit 1; }
cat $build/cuda-status.txt
targets="lamina test_cuda_ops test_cuda_model"
for f in tests/cuda/test_cuda_host_*.cu; do [ -f "$f" ] && targets="$targets $(basename "$f" .cu)"; done
cmake --build $build -j "$jobs" --target $targets || { echo "gpu-check: build failed"; exit 1; }

stamp "CUDA tests"
(cd $build && ctest -L cuda --output-on-failure --timeout 300)
tests_rc=$?

if [ "${GPU_CHECK_SKIP_BENCH:-0}" != 1 ]; then
    lamina=$build/tools/lamina
    models=/tmp/gpu-check-models
    mkdir -p $models
    export LM_SHARED_DIR="$shared"
    stamp "models"
    [ -f $models/tinyllama-q4_0.gguf ] ||
        $lamina mkmodel tinyllama-1.1b $models/tinyllama-q4_0.gguf --type Q4_0 --threads "$jobs" >/dev/null
    if [ "${GPU_CHECK_SKIP_7B:-0}" != 1 ] && [ ! -f $models/llama7b-q4_0.gguf ]; then
        $lamina mkmodel llama-7b $models/llama7b-q4_0.gguf --type Q4_0 --threads "$jobs" >/dev/null
    fi
    stamp "bench: TinyLlama Q4_0, GPU (-ngl 99) then CPU (-ngl 0, $jobs threads)"
    $lamina bench -m $models/tinyllama-q4_0.gguf -ngl 99 -p 512 -n 128 -r 3
    $lamina bench -m $models/tinyllama-q4_0.gguf -ngl 0 -t "$jobs" -p 512 -n 128 -r 1
    stamp "bench: TinyLlama Q4_0, GPU tg without CUDA graphs (LAMINA_CUDA_GRAPHS=0; compare with tg128 above)"
    LAMINA_CUDA_GRAPHS=0 $lamina bench -m $models/tinyllama-q4_0.gguf -ngl 99 -p 0 -n 128 -r 3
    if [ -f $models/llama7b-q4_0.gguf ]; then
        stamp "bench: Llama-7B Q4_0, GPU"
        $lamina bench -m $models/llama7b-q4_0.gguf -ngl 99 -p 512 -n 128 -r 3
    fi
fi
stamp "done (CUDA tests: $([ $tests_rc = 0 ] && echo passed || echo FAILED))"
exit $tests_rc
