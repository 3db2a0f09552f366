#!/usr/bin/env bash
# `tlt generate --model` on a real model: SmolLM2-135M-Instruct (scripts/setup.sh fetches it)
# answers "What is the capital of France?" with a sentence naming Paris, and loading it peaks
# below 1.2 GB RSS; with --speculative (n-gram arm) the answer is the same. `tlt models` lists it;
# a missing or damaged model is a one-line error.
# Usage: generate_model.sh TLT_BINARY SOURCE_DIR
set -u
tlt=$1; src=$2; fail=0
model=${TLT_SMOLLM2_GGUF:-$HOME/.cache/tlt/models/SmolLM2-135M-Instruct.Q4_1.gguf}
[ -f "$model" ] || { echo "FAIL: $model is missing; scripts/setup.sh fetches it"; exit 1; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
answer=$("$tlt" generate --model "$model" --chat "What is the capital of France?" \
         --max-tokens 48 --verbose 2>"$log")
rc=$?
cat "$log"
echo "answer: $answer"
[ $rc -eq 0 ] || { echo "FAIL: tlt generate exited $rc"; fail=1; }
echo "$answer" | grep -q "Paris" || { echo "FAIL: the answer does not name Paris"; fail=1; }
load_rss=$(sed -n 's/.*load_seconds=.* peak_rss_mb=\([0-9]*\).*/\1/p' "$log" | head -1)
end_rss=$(sed -n 's/^generated=.* peak_rss_mb=\([0-9]*\).*/\1/p' "$log" | head -1)
{ [ -n "$load_rss" ] && [ "$load_rss" -lt 1200 ]; } ||
  { echo "FAIL: loading peaked at '${load_rss}' MB RSS, want < 1200"; fail=1; }
{ [ -n "$end_rss" ] && [ "$end_rss" -lt 1200 ]; } ||
  { echo "FAIL: the run peaked at '${end_rss}' MB RSS, want < 1200"; fail=1; }
# Speculation with the drafter-free n-gram arm: the same greedy answer, and the summary counts
# its steps.
spec=$("$tlt" generate --model "$model" --chat "What is the capital of France?" \
       --max-tokens 48 --speculative --arms ngram 2>"$log") || { cat "$log"; echo "FAIL: --speculative exited $?"; fail=1; }
[ "$spec" = "$answer" ] || { echo "FAIL: the speculative answer '$spec' differs from the plain one"; fail=1; }
grep -q '^generated=.* spec_steps=[0-9]* accept_length=' "$log" ||
  { cat "$log"; echo "FAIL: no spec_steps and accept_length in the summary"; fail=1; }
TLT_MODELS_DIR=$(dirname "$model") "$tlt" models | grep -q "^$(basename "$model")  " ||
  { echo "FAIL: tlt models does not list $(basename "$model")"; fail=1; }
err=$("$tlt" generate --model /nonexistent/x.gguf 2>&1) && { echo "FAIL: a missing model ran"; fail=1; }
echo "$err" | grep -q "/nonexistent/x.gguf: no such file" ||
  { echo "FAIL: missing model: '$err'"; fail=1; }
err=$("$tlt" generate --model "$src/tests/models/fixtures/tiny-llama.gguf" 2>&1) &&
  { echo "FAIL: a GGUF without a tokenizer ran"; fail=1; }
echo "$err" | grep -q "tokenizer.ggml.model" || { echo "FAIL: no tokenizer: '$err'"; fail=1; }
[ $fail -eq 0 ] && echo "generate --model: Paris, peak RSS ${end_rss} MB"
exit $fail
