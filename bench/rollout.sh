#!/usr/bin/env bash
# Runs bench/rollout on the State of the Union corpus: tokenizes it once (cached), then
# bench_rollout with the given flags (default: the small preset).
# Usage: bench/rollout.sh [bench_rollout flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${TLT_CACHE:-$HOME/.cache/tlt}
tokens=$cache/corpora/sotu-bpe4096-h0.05.tokens
if [ ! -f "$tokens" ]; then
  mkdir -p "$cache/corpora" "$cache/tokenizers"
  build/bin/tlt-data tokenize --corpus sotu --vocab 4096 --held-out 0.05 \
    --tokenizer "$cache/tokenizers/sotu-bpe4096-h0.05.model" --out "$tokens"
fi
# Train and cache on all cores, then measure in a fresh single-threaded process (BLIS fixes
# its thread count when it starts).
build/bin/bench_rollout --tokens "$tokens" --prepare-only "$@"
BLIS_NUM_THREADS=1 OMP_NUM_THREADS=1 exec build/bin/bench_rollout --tokens "$tokens" "$@"
