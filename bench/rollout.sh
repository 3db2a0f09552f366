#!/usr/bin/env bash
# bench/rollout: plain vs adaptive speculative decoding, side by side (`tlt bench rollout`:
# tokenizes the State of the Union corpus once, trains and caches the target and drafter on
# all cores, then measures on one).
# Usage: bench/rollout.sh [bench_rollout flags...]   (build/bin/bench_rollout --help lists them)
set -euo pipefail
cd "$(dirname "$0")/.."
exec build/bin/tlt bench rollout "$@"
