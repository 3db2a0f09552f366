#!/usr/bin/env bash
# Builds the manifest-parser fuzz target with clang/libFuzzer (ASan + UBSan) into build-fuzz/ and
# runs it for a bounded time from the examples and the malformed-manifest corpus. Fails on a
# crash, a leak, a hang (one input > 10 s) or a broken round trip.
# Usage: scripts/fuzz.sh [SECONDS]   (default 60)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/tlt/ccache}
cmake -S . -B build-fuzz -G Ninja -DTLT_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++-14 \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/tmp/tlt-cmake-fuzz.log 2>&1 || { cat /tmp/tlt-cmake-fuzz.log; exit 1; }
ninja -C build-fuzz manifest_fuzz >/tmp/tlt-ninja-fuzz.log 2>&1 || { cat /tmp/tlt-ninja-fuzz.log; exit 1; }
mkdir -p build-fuzz/corpus build-fuzz/artifacts
echo "fuzz: manifest parser for ${seconds}s"
if ! build-fuzz/bin/manifest_fuzz build-fuzz/corpus examples tests/manifests/bad tests/fuzz/regressions \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
    -dict=tests/fuzz/manifest.dict -artifact_prefix=build-fuzz/artifacts/ \
    >/tmp/tlt-fuzz.log 2>&1; then
  tail -40 /tmp/tlt-fuzz.log
  echo "fuzz: FAILED; the input that broke it is in build-fuzz/artifacts/"
  exit 1
fi
grep -E '^#[0-9]+.*(DONE|pulse)' /tmp/tlt-fuzz.log | tail -1 | sed 's/^/fuzz: /'
echo "fuzz: no crash, leak or hang"
