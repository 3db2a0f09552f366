#!/usr/bin/env bash
# Configures and builds tlt (both binaries and the tests) into build/, reusing a compiler cache
# outside the checkout (~/.cache/tlt/ccache). Extra arguments go to CMake.
# Usage: scripts/build.sh [-DOPTION=VALUE ...]
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/tlt/ccache}
export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-8G}
# Paths under the checkout are hashed relative to it, and the build directory's own path is left
# out, so a fresh clone elsewhere (CI's, a second worktree) hits the same cache entries.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(pwd)}
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}
mkdir -p "$CCACHE_DIR"
jobs=$(nproc)
start=$(date +%s)
echo "build: configuring build/ ($*)"
cmake -S . -B build -G Ninja "$@" >/tmp/tlt-cmake.log 2>&1 || { cat /tmp/tlt-cmake.log; exit 1; }
echo "build: compiling with $jobs jobs"
ninja -C build -j "$jobs" || { echo "build: failed"; exit 1; }
echo "build: done in $(( $(date +%s) - start )) s: build/bin/tlt, build/bin/tlt-operator"
