#!/usr/bin/env bash
# bench/weight_sync: time to publish SmolLM2-135M's weights to 2 and 4 local workers, the
# checkpoint file, the channel (a cluster pod's path) and the Gloo weight-sync group side by
# side in one run, with the ratios (bench/weight_sync.cc says what each path includes).
# Builds bench_weight_sync first. Arguments go to it (--model PATH loads a real checkpoint, e.g.
# ~/.cache/tlt/models/SmolLM2-135M-Instruct.Q4_1.gguf; default: random weights of its shape).
# Usage: bench/weight_sync.sh [--workers 2,4] [--repeats 3] [--bucket-mb 32] [--model PATH]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh --target bench_weight_sync >/dev/null
echo "commit $(git rev-parse --short HEAD); $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
exec build/bin/bench_weight_sync "$@"
