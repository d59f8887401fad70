#!/usr/bin/env bash
# deps.sh - install the build tools lamina needs when they are missing.
# Runs apt-get only when something is missing (and uses sudo when not root).
# clang (the second sanitizer build and the libFuzzer targets of `make test`)
# is optional: installed when apt knows a candidate for it, else the suite
# says it skips those steps.
set -euo pipefail
need=()
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v cc >/dev/null 2>&1 || need+=(gcc)
command -v c++ >/dev/null 2>&1 || need+=(g++)
command -v make >/dev/null 2>&1 || need+=(make)
command -v ctest >/dev/null 2>&1 || need+=(cmake)
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
updated=0
if ((${#need[@]})); then
  echo "deps: installing ${need[*]}" >&2
  $SUDO apt-get update -qq
  updated=1
  $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
clang_candidate() { apt-cache policy clang 2>/dev/null | awk '/Candidate:/ {print $2}'; }
if ! command -v clang >/dev/null 2>&1 && command -v apt-cache >/dev/null 2>&1; then
  cand=$(clang_candidate)
  if { [ -z "$cand" ] || [ "$cand" = "(none)" ]; } && ((updated == 0)); then
    $SUDO apt-get update -qq || true # a fresh image has empty package lists
    cand=$(clang_candidate)
  fi
  if [ -n "$cand" ] && [ "$cand" != "(none)" ]; then
    echo "deps: installing clang $cand (clang sanitizer build, libFuzzer)" >&2
    $SUDO apt-get install -y -qq clang >/dev/null || echo "deps: clang could not be installed; its steps are skipped" >&2
  else
    echo "deps: no clang package known to apt; the clang steps of make test are skipped" >&2
  fi
fi
