#!/usr/bin/env bash
# `tlt bench rollout --model PATH --ceiling-only` on the tiny GGUF fixture: the table of the
# issue (one row per batch size, a ceiling per row) and the peak RSS. Without --ceiling-only, on
# the tiny Hugging Face llama (it carries a tokenizer and chat template): the ceilings, the drafter
# warm-started on the model's generations and cached (the measuring process loads it), then plain
# vs adaptive per batch size with each arm alone; a GGUF without a tokenizer is refused.
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
export TLT_CACHE=$(mktemp -d); trap 'rm -rf "$TLT_CACHE"' EXIT  # this test's drafter cache
out=$("$tlt" bench rollout --model "$src/tests/models/fixtures/tiny-llama-hf" --batches 1,2 \
        --fixed-batches 1 --max-new 8 --waves 1 --repeats 1 --drafter-steps 3 --drafter-vocab 16 \
        --arms 4_1_5,ngram 2>&1) || { echo "$out"; echo "FAIL: a --model decoding run exited non-zero"; exit 1; }
echo "$out"
echo "$out" | grep -q "^drafter (features=last): trained and cached $TLT_CACHE/drafter/generations-" ||
  { echo "FAIL: the preparing process did not train and cache the drafter"; exit 1; }
echo "$out" | grep -q "^drafter (features=last): loaded $TLT_CACHE/drafter/generations-.* draft vocabulary 16)" ||
  { echo "FAIL: the measuring process did not load the cached drafter"; exit 1; }
for b in 1 2; do
  echo "$out" | grep -Eq "^ +$b +(last +)?[0-9.]+ +[0-9.]+ +[0-9.]+x +[0-9.]+ " ||
    { echo "FAIL: no plain vs adaptive row for batch $b"; exit 1; }
done
for arm in 4_1_5 ngram; do
  echo "$out" | grep -Eq "^ +fixed +(last +)?$arm +[0-9.]+ +[0-9.]+x +[0-9.]+ " ||
    { echo "FAIL: no fixed-arm row for $arm"; exit 1; }
done
if err=$("$tlt" bench rollout --model "$src/tests/models/fixtures/tiny-llama.gguf" 2>&1); then
  echo "FAIL: --model without a tokenizer succeeded"; exit 1
fi
echo "$err" | grep -qi "tokenizer" || { echo "FAIL: the refusal does not name the tokenizer: $err"; exit 1; }
echo "ok: bench rollout --model prints the ceilings, warm-starts the drafter and compares"
