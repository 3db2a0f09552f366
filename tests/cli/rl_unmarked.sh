#!/usr/bin/env bash
# spec.algorithm.warmStartUnmarkedAnswers: the warm start's cache key changes with it (a job
# with and without it never share a warm start), the run says when a free-text reward makes it
# moot, and the held-out line reports the share of marked answers.
# Usage: rl_unmarked.sh TLT_BINARY
set -u
tlt=$1
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
export TLT_CACHE=$work/cache
fail() { echo "FAIL: $*"; exit 1; }
job() {  # job NAME ANSWER UNMARKED
  cat > "$work/$1.yaml" <<YAML
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata: {name: $1}
spec:
  model: {preset: micro}
  task: {name: arithmetic-cot, seed: 1, heldOut: 8, answer: $2}
  algorithm: {steps: 1, promptsPerStep: 2, groupSize: 2, maxResponseTokens: 16,
              warmStartSteps: 3, seed: 0, warmStartUnmarkedAnswers: $3}
  drafter: {warmStartSteps: 0}
  roles: {rollout: {replicas: 1}}
  checkpoint: {path: $work/ckpt-$1, everySteps: 1}
  metrics: {port: 0}
YAML
  "$tlt" run "$work/$1.yaml" --baseline > "$work/$1.log" 2>&1 || { cat "$work/$1.log"; fail "$1 exited $?"; }
}
job marked marker 0
job unmarked marker 0.5
job freetext free-text 0.5
note="warmStartUnmarkedAnswers leaves answers unmarked, but the reward also reads unmarked ones"
grep -q "$note" "$work/freetext.log" || { cat "$work/freetext.log"; fail "no note for a free-text reward"; }
for j in marked unmarked; do
  grep -q "$note" "$work/$j.log" && fail "$j: the free-text note under the marker rule"
  grep -Eq "held-out reward .*; answers marked [0-9]+% -> [0-9]+%$" "$work/$j.log" ||
    { cat "$work/$j.log"; fail "$j: no share of marked answers on the held-out line"; }
done
ws() { grep -o "warm start: [^ ]*\.ckpt$" "$work/$1.log" | head -1; }
[ -n "$(ws marked)" ] || { cat "$work/marked.log"; fail "no warm start path in the log"; }
[ "$(ws marked)" != "$(ws unmarked)" ] || fail "the same cached warm start with and without unmarked answers: $(ws marked)"
[ "$(ls "$work/cache/rl/" | grep -c '\.ckpt$')" -ge 2 ] || { ls -R "$work/cache"; fail "expected two cached warm starts"; }
echo "ok: distinct cached warm starts, the free-text note, marked shares reported"
