#!/usr/bin/env bash
# Configures and builds tlt into build/, reusing a compiler cache outside the checkout
# (~/.cache/tlt/ccache). With no --target it builds everything (both binaries, the benches and the
# tests); `--target tlt` builds only the runtime binary and what it runs (scripts/try.sh).
# Other arguments go to CMake.
# Usage: scripts/build.sh [--target TARGET ...] [-DOPTION=VALUE ...]
set -euo pipefail
cd "$(dirname "$0")/.."
targets=() cmake_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --target) [ $# -ge 2 ] || { echo "build: --target needs a target name (e.g. tlt)" >&2; exit 2; }
              targets+=("$2"); shift 2 ;;
    *) cmake_args+=("$1"); shift ;;
  esac
done
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
ccache --zero-stats >/dev/null 2>&1 || true
echo "build: configuring build/ (${cmake_args[*]:-})"
cmake -S . -B build -G Ninja ${cmake_args[@]+"${cmake_args[@]}"} >/tmp/tlt-cmake.log 2>&1 ||
  { cat /tmp/tlt-cmake.log; exit 1; }
what=${targets[*]:-everything}
echo "build: compiling $what with $jobs jobs (compiler cache: $CCACHE_DIR)"
ninja -C build -j "$jobs" ${targets[@]+"${targets[@]}"} || { echo "build: failed"; exit 1; }
hits=$(ccache -s 2>/dev/null | awk '/Hits:/ {print $2 " of " $4; exit}')
echo "build: $what done in $(( $(date +%s) - start )) s${hits:+ (compiler cache: $hits compilations were hits)}"
