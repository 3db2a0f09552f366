#!/usr/bin/env bash
# bench/trainer_dp: SmolLM2-135M's GRPO policy update on 1 trainer rank and on 2 (data parallel
# over Gloo, AdamW state sharded: ZeRO-1), side by side in one run: each update's time, each
# rank's peak RSS and optimizer bytes, and the ratios (bench/trainer_dp.cc says what runs).
# Builds bench_trainer_dp first. Arguments go to it; default model: the HF SmolLM2 that
# scripts/setup.sh fetches, when present (else its shape with random weights).
# Usage: bench/trainer_dp.sh [--model PATH] [--updates 2] [--groups 2] [--group-size 4]
set -euo pipefail
cd "$(dirname "$0")/.."
flock /tmp/tlt-build.lock ninja -C build bench_trainer_dp >/dev/null
model=()
hf=$HOME/.cache/tlt/models/SmolLM2-135M-Instruct-hf
if [ -f "$hf/config.json" ] && [[ " $* " != *" --model "* ]]; then model=(--model "$hf"); fi
echo "commit $(git rev-parse --short HEAD); $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
exec build/bin/bench_trainer_dp "${model[@]}" "$@"
