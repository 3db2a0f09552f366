#!/usr/bin/env bash
# `tlt bench rollout --model PATH --ceiling-only` on the tiny GGUF fixture: the table of the
# issue (one row per batch size, a ceiling per row) and the peak RSS; without --ceiling-only it
# refuses, naming the flag.
# Usage: bench_model.sh TLT SOURCE_DIR
set -euo pipefail
tlt=$1 src=$2
out=$("$tlt" bench rollout --model "$src/tests/models/fixtures/tiny-llama.gguf" --ceiling-only \
        --batches 1,3 2>&1) || { echo "$out"; echo "FAIL: bench rollout --model exited non-zero"; exit 1; }
echo "$out"
for b in 1 3; do
  echo "$out" | grep -Eq "^\| $b \| [0-9]+ ms \| [0-9]+ ms \| [0-9]+ ms \| [0-9.]+x \|$" ||
    { echo "FAIL: no table row for batch $b"; exit 1; }
done
echo "$out" | grep -Eq '^peak_rss_mb=[1-9][0-9]*$' || { echo "FAIL: no peak_rss_mb line"; exit 1; }
echo "$out" | grep -q 'architecture=llama layers=2 dim=32 vocab=64' ||
  { echo "FAIL: the model line does not describe tiny-llama"; exit 1; }
if err=$("$tlt" bench rollout --model "$src/tests/models/fixtures/tiny-llama.gguf" 2>&1); then
  echo "FAIL: --model without --ceiling-only succeeded"; exit 1
fi
echo "$err" | grep -q -- "--ceiling-only" || { echo "FAIL: the refusal does not name --ceiling-only: $err"; exit 1; }
echo "ok: bench rollout --model prints the ceiling table and the peak RSS"
