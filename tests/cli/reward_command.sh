#!/usr/bin/env bash
# An RLJob whose reward is the user's program (spec.reward.type: command), through `tlt run`:
#   1. bench/reward_overlap.sh on 2 steps: rewards scored while the tail generates are the very
#      rewards of serial scoring (it fails otherwise), and it prints the step times' ratio;
#   2. a reward program that dies for good after a step: the next step fails with an error
#      naming spec.reward.command and spec.reward.retries, tlt exits non-zero, and the last
#      checkpoint (step 1) is kept;
#   3. a reward program that does not exist: refused before any training, naming the field.
# Usage: reward_command.sh TLT_BINARY SOURCE_DIR
set -u
tlt=$1; src=$2
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

out=$("$src/bench/reward_overlap.sh" "$tlt" 2 20 2>&1) || { echo "$out"; fail "the bench failed"; }
echo "$out"
echo "$out" | grep -q "ratio serial / overlapped: " || fail "the bench printed no ratio"

# manifest NAME COMMAND_YAML > FILE
manifest() {
  cat <<YAML
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata: {name: $1}
spec:
  model: {preset: micro}
  task: {name: arithmetic-cot, seed: 1, heldOut: 4}
  reward: {type: command, command: $2, timeout: 5s, retries: 1}
  algorithm: {steps: 3, promptsPerStep: 4, groupSize: 4, maxResponseTokens: 64, seed: 0}
  roles: {rollout: {replicas: 2}}
  checkpoint: {path: $work/$1, everySteps: 1}
  metrics: {port: 0}
YAML
}
# Answers 32 requests in all (the held-out evaluation's 16 and step 1's 16), then exits at once,
# however often it is restarted.
cat > "$work/dies.py" <<PY
import json, os, sys
count = "$work/answered"
n = int(open(count).read()) if os.path.exists(count) else 0
for line in sys.stdin:
    if n >= 32:
        sys.exit(7)
    print(json.dumps({"id": json.loads(line)["id"], "reward": 0.5}), flush=True)
    n += 1
    open(count, "w").write(str(n))
PY
manifest dies "[python3, $work/dies.py]" > "$work/dies.yaml"
"$tlt" run "$work/dies.yaml" --baseline > "$work/dies.log" 2>&1 && { cat "$work/dies.log"; fail "a dead reward program did not fail the job"; }
grep -q "spec.reward.command" "$work/dies.log" || { cat "$work/dies.log"; fail "the error does not name spec.reward.command"; }
grep -q "exited with status 7" "$work/dies.log" || { cat "$work/dies.log"; fail "the error does not say how the program ended"; }
grep -q "spec.reward.retries" "$work/dies.log" || { cat "$work/dies.log"; fail "the error does not name spec.reward.retries"; }
[ -d "$work/dies/baseline/step-1" ] || { ls -R "$work/dies" | head; fail "the last checkpoint (step 1) is gone"; }
[ -d "$work/dies/baseline/step-2" ] && fail "a failed step wrote a checkpoint"

manifest missing "[/nonexistent/reward.py]" > "$work/missing.yaml"
"$tlt" run "$work/missing.yaml" --baseline > "$work/missing.log" 2>&1 && fail "a missing reward program did not fail"
grep -q "spec.reward.command.*cannot start /nonexistent/reward.py" "$work/missing.log" || { cat "$work/missing.log"; fail "the error does not name the missing program"; }
grep -q "^baseline: step 1" "$work/missing.log" && fail "a step ran without a reward program"
echo "reward_command: PASS"
