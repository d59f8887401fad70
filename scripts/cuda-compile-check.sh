#!/usr/bin/env bash
# cuda-compile-check.sh - build the CUDA backend and its tests with another
# nvcc (by default Debian's CUDA 11.8) in a build folder outside the repo, and
# run the tests that need no GPU (ctest label cuda: the host tests pass, the
# GPU tests say Skipped). Issue 16 asks the CUDA code to build with CUDA 11.8
# and 13 for sm_80 and sm_90; the default build uses /usr/local/cuda (13).
#
#   scripts/cuda-compile-check.sh [BUILD_DIR]   (default /tmp/lamina-cuda-check)
#
# Environment: NVCC (default /usr/bin/nvcc), CUDA_HOST_CXX (default: clang++-14
# when NVCC is CUDA 11.x, whose nvcc refuses Debian bookworm's gcc 12; empty =
# nvcc's own choice), JOBS (default 2).
#
# Debian's toolkit is in the non-free component, which the project does not
# install (it is large and CI needs no GPU): once per machine,
#   printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: non-free\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
#       > /etc/apt/sources.list.d/non-free.sources
#   apt-get update && apt-get install --no-install-recommends -y nvidia-cuda-toolkit
# (about 1.6 GB to fetch).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-/tmp/lamina-cuda-check}
nvcc=${NVCC:-/usr/bin/nvcc}
jobs=${JOBS:-2}

if [[ ! -x $nvcc ]]; then
    echo "cuda-compile-check: no nvcc at $nvcc (see the comment at the top of this script)" >&2
    exit 2
fi
version=$("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
host=${CUDA_HOST_CXX-}
if [[ -z ${CUDA_HOST_CXX+x} && $version == 11.* ]] && command -v clang++-14 > /dev/null; then
    host=$(command -v clang++-14)
fi

# This toolkit's own tools first on PATH: nvcc finds ptxas, cicc and fatbinary
# through PATH, and another CUDA's (in /usr/local/cuda/bin, or the wrappers of
# /usr/local/bin) would otherwise win. Debian's /usr/bin/nvcc is a wrapper of
# /usr/lib/nvidia-cuda-toolkit/bin/nvcc, its ptxas is /usr/bin/ptxas.
bin=$(dirname "$(readlink -f "$nvcc")")
[[ $nvcc == /usr/bin/nvcc && -x /usr/lib/nvidia-cuda-toolkit/bin/nvcc ]] && bin=/usr/lib/nvidia-cuda-toolkit/bin
path=$bin:$(dirname "$nvcc"):$(tr ':' '\n' <<< "$PATH" | grep -v '/cuda[^/]*/bin$' | paste -sd: -)
args=(-S "$here" -B "$build" -DCMAKE_BUILD_TYPE=Release -DLAMINA_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc")
[[ -n $host ]] && args+=(-DCMAKE_CUDA_HOST_COMPILER="$host")

echo "cuda-compile-check: nvcc $version ($nvcc), host compiler ${host:-the default}, build $build"
PATH=$path cmake "${args[@]}" > "$build.configure.log" 2>&1 || {
    tail -30 "$build.configure.log" >&2
    exit 1
}
grep "lamina: CUDA" "$build.configure.log"
targets=$(PATH=$path cmake --build "$build" --target help | sed -n 's/^\.\.\. \(test_cuda_[a-z_]*\)$/\1/p')
# shellcheck disable=SC2086 # one word per target
PATH=$path cmake --build "$build" -j "$jobs" --target lm_cuda $targets
cd "$build"
PATH=$path ctest -L cuda --output-on-failure
echo "cuda-compile-check: nvcc $version built the CUDA backend and its tests; host tests passed"
