#!/usr/bin/env bash
# bench/rollout: plain vs adaptive speculative decoding, side by side (`tlt bench rollout`:
# tokenizes the State of the Union corpus once, trains and caches the target and drafter on
# all cores, then measures on one).
# Usage: bench/rollout.sh [bench_rollout flags...]   (build/bin/bench_rollout --help lists them;
#        --device auto|cpu|cuda|cuda:N puts the target, drafters and engines there)
# --model SmolLM2 names the GGUF that scripts/setup.sh fetches,
# $TLT_MODELS_DIR/SmolLM2-135M-Instruct.Q4_1.gguf (default ~/.cache/tlt/models); any other
# --model is a path. TLT_BIN: the tlt that runs it (default build/bin/tlt; bench_rollout and
# tlt-data beside it).
set -euo pipefail
cd "$(dirname "$0")/.."
smollm2=${TLT_MODELS_DIR:-$HOME/.cache/tlt/models}/SmolLM2-135M-Instruct.Q4_1.gguf
args=()
prev=""
for a in "$@"; do
  [[ $prev == --model && $a == SmolLM2 ]] && a=$smollm2
  [[ $a == --model=SmolLM2 ]] && a=--model=$smollm2
  args+=("$a")
  prev=$a
done
exec "${TLT_BIN:-build/bin/tlt}" bench rollout "${args[@]}"
