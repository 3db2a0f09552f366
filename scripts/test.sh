#!/usr/bin/env bash
# The test command: installs what is missing, builds, fuzzes the manifest parser for a bounded
# time, then runs every test with ctest. `.ci/run` runs exactly this.
# Usage: scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
scripts/setup.sh
scripts/build.sh
scripts/fuzz.sh "${TLT_FUZZ_SECONDS:-60}"
# The operator's integration tests (ctest label k8s) start a real etcd + kube-apiserver: build
# them into the cache outside the checkout now, once (slow the first time, a no-op afterwards),
# rather than inside a ctest timeout. With Kueue: operator.kueue_apiserver (label kueue) runs it.
scripts/k8s-tools.sh kueue >/dev/null
echo "test: set-up, build and fuzzing took $(( $(date +%s) - start )) s; now ctest (its summary is the last line)"
cd build
exec ctest -j "$(nproc)" --output-on-failure --timeout 1200
