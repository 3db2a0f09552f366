#!/usr/bin/env bash
# The newcomer's first command: installs what is missing, builds, runs the embedded default (the
# tiny RL job) on this machine, then has SmolLM2-135M-Instruct answer one chat prompt, plainly and
# with speculative decoding, and prints both speeds and the time it all took.
# Usage: scripts/try.sh [EXTRA tlt run FLAGS]
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
say() { printf 'try: %s\n' "$*"; }

scripts/setup.sh --runtime       # what building and running tlt needs (and SmolLM2): no test tools
scripts/build.sh --target tlt   # the runtime binary only: no tests, no operator
say "build/bin/tlt run examples/rljob-tiny.yaml $*"
build/bin/tlt run examples/rljob-tiny.yaml "$@"

# A real model: greedy, so the speculative answer must be the plain one token for token. The
# n-gram arm drafts from the text so far (no drafter to train for it): it pays where an answer
# repeats itself or the prompt, and the bandit falls back to plain decoding where it does not.
model=${TLT_MODELS_DIR:-$HOME/.cache/tlt/models}/SmolLM2-135M-Instruct.Q4_1.gguf
prompt="Write a Python function that returns the sum of a list of numbers."
plain_log=$(mktemp)
spec_log=$(mktemp)
trap 'rm -f "$plain_log" "$spec_log"' EXIT
generate() {
  build/bin/tlt generate --model "$model" --chat "$prompt" --max-tokens 128 "$@"
}
say "build/bin/tlt generate --model $model --chat \"$prompt\" [--speculative --arms ngram]"
answer=$(generate 2>"$plain_log") || { cat "$plain_log" >&2; exit 1; }
spec_answer=$(generate --speculative --arms ngram 2>"$spec_log") || { cat "$spec_log" >&2; exit 1; }
echo "$answer"
field() { sed -n "/^generated=/s/.*\(^\| \)$2=\([0-9.e+-]*\).*/\2/p" "$1" | head -1; }
plain_tps=$(field "$plain_log" tokens_per_s)
spec_tps=$(field "$spec_log" tokens_per_s)
[ -n "$plain_tps" ] && [ -n "$spec_tps" ] ||
  { cat "$plain_log" "$spec_log" >&2; say "error: tlt generate printed no tokens_per_s"; exit 1; }
[ "$answer" = "$spec_answer" ] ||
  { say "error: the speculative answer differs from the plain one"; echo "$spec_answer"; exit 1; }
awk -v p="$plain_tps" -v s="$spec_tps" -v a="$(field "$spec_log" accept_length)" \
    -v n="$(field "$plain_log" generated)" 'BEGIN {
  printf "try: SmolLM2-135M-Instruct, %d tokens: plain %.1f tokens/s, speculative %.1f tokens/s " \
         "(%.2fx; n-gram drafts, %.2f tokens per verification), the same answer\n", n, p, s, s / p, a
}'
say "done in $(((SECONDS - start) / 60)) min $(((SECONDS - start) % 60)) s"
