#!/usr/bin/env bash
# deps.sh - install the build tools lamina needs when they are missing.
# Runs apt-get only when something is missing (and uses sudo when not root).
# Required: a C toolchain, cmake, pkg-config and the -dev packages of the
# libraries `lamina serve` and `lamina chat` use (libmicrohttpd, jansson, libedit).
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
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
# libraries of `lamina serve` (HTTP, JSON) and `lamina chat` (line editing)
for pkg in libmicrohttpd-dev libjansson-dev libedit-dev; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
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
# clang-format (optional): tests/tools/test_format.sh checks the lines changed
# since .clang-format-base with git-clang-format (same package) and skips without it.
if ! command -v git-clang-format >/dev/null 2>&1 && command -v apt-cache >/dev/null 2>&1; then
  cand=$(apt-cache policy clang-format 2>/dev/null | awk '/Candidate:/ {print $2}')
  if [ -n "$cand" ] && [ "$cand" != "(none)" ]; then
    echo "deps: installing clang-format $cand (format check of changed lines)" >&2
    $SUDO apt-get install -y -qq clang-format >/dev/null || echo "deps: clang-format could not be installed; the format check skips" >&2
  else
    echo "deps: no clang-format package known to apt; the format check skips" >&2
  fi
fi
# chromium (optional): tests/tools/test_serve_webui.sh drives the server's chat
# page in headless Chromium and skips without it.
if ! command -v chromium >/dev/null 2>&1 && command -v apt-cache >/dev/null 2>&1; then
  cand=$(apt-cache policy chromium 2>/dev/null | awk '/Candidate:/ {print $2}')
  if [ -n "$cand" ] && [ "$cand" != "(none)" ]; then
    echo "deps: installing chromium $cand (web page test of lamina serve)" >&2
    $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null ||
      echo "deps: chromium could not be installed; the web page test skips" >&2
  else
    echo "deps: no chromium package known to apt; the web page test skips" >&2
  fi
fi
