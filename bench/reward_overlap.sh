#!/usr/bin/env bash
# Rewards overlapped with the rollout's tail (issue 39, item 3), A/B in one invocation: the same
# RLJob (the micro preset on arithmetic-cot, 2 rollout workers, --baseline so that only the
# scoring differs) twice, its reward a command (examples/rewards/numeric_reward.py) that sleeps
# SLEEP_MS per response:
#   serial      TLT_REWARD_SERIAL=1: every response scored after the rollout, in the update;
#   overlapped  each response submitted the moment it finishes (workers stream them), scored while
#               the tail still generates.
# Prints each run's mean step seconds (steps 2.. : step 1 also loads the workers), their ratio,
# and how long the policy update waited for rewards after the rollout (the driver's log: the
# direct measure, less noisy than whole steps on a shared machine); fails unless the two runs'
# per-step rewards are identical (overlap must not change them).
# Usage: bench/reward_overlap.sh [TLT_BINARY] [STEPS] [SLEEP_MS]   (defaults: build/bin/tlt 6 50)
# Environment: PRESET (micro), PROMPTS (8), GROUP (4), WORKERS (2), MAX_TOKENS (96), HELD_OUT (8): the job's shape; MODEL: a
# model directory (spec.model.path, e.g. tests/models/fixtures/tiny-llama-hf) instead of micro.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
tlt=${1:-$src/build/bin/tlt}; steps=${2:-6}; sleep_ms=${3:-50}
model="preset: ${PRESET:-micro}"; [ -n "${MODEL:-}" ] && model="path: $(cd "$MODEL" && pwd)"
prompts=${PROMPTS:-8}; group=${GROUP:-4}; workers=${WORKERS:-2}; max_tokens=${MAX_TOKENS:-96}
work=$(mktemp -d); trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT; echo "reward_overlap: work directory $work" >&2
manifest() {  # manifest NAME > FILE
  cat <<YAML
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata: {name: $1}
spec:
  model: {$model}
  task: {name: arithmetic-cot, seed: 1, heldOut: ${HELD_OUT:-8}}
  reward:
    type: command
    command: [python3, $src/examples/rewards/numeric_reward.py, --sleep-ms, "$sleep_ms"]
  algorithm: {steps: $steps, promptsPerStep: $prompts, groupSize: $group,
              maxResponseTokens: $max_tokens, learningRate: 3.0e-5, klCoef: 0.01, seed: 0}
  roles: {rollout: {replicas: $workers}}
  checkpoint: {path: $work/$1}
  metrics: {port: 0}
YAML
}
for mode in serial overlapped; do
  manifest "$mode" > "$work/$mode.yaml"
  if [ "$mode" = serial ]; then export TLT_REWARD_SERIAL=1; else unset TLT_REWARD_SERIAL; fi
  "$tlt" run "$work/$mode.yaml" --baseline > "$work/$mode.log" 2>&1 ||
    { cat "$work/$mode.log"; echo "reward_overlap: the $mode run failed" >&2; exit 1; }
done
python3 - "$work" "$sleep_ms" "$prompts" "$group" "$workers" <<'PY'
import json, statistics, sys
w, sleep_ms, prompts, group, workers = sys.argv[1:6]
runs = {m: json.load(open("%s/%s/report/baseline.json" % (w, m)))["steps"]
        for m in ("serial", "overlapped")}
rewards = {m: [s["rewardMean"] for s in steps] for m, steps in runs.items()}
if rewards["serial"] != rewards["overlapped"]:
    sys.exit("reward_overlap: FAIL: rewards differ: serial %s, overlapped %s"
             % (rewards["serial"], rewards["overlapped"]))
import re
def waits(m):  # "step N rewards: K of B scored by the end of the rollout; waited X s ..."
    found = re.findall(r"step (\d+) rewards: (\d+) of \d+ scored .*; waited ([0-9.]+) s",
                       open("%s/%s.log" % (w, m)).read())
    return [(int(k), float(x)) for step, k, x in found if int(step) > 1]
wait = {m: waits(m) for m in runs}
mean = {m: statistics.mean(s["stepSeconds"] for s in steps[1:]) for m, steps in runs.items()}
rollout = {m: statistics.mean(s["rolloutSeconds"] for s in steps[1:]) for m, steps in runs.items()}
n = len(runs["serial"])
print("reward_overlap: %d steps x %d responses on %s workers, a command reward sleeping %s ms each"
      % (n, int(prompts) * int(group), workers, sleep_ms))
print("  rewards per step (identical in both runs): %s" % rewards["serial"])
for m in ("serial", "overlapped"):
    print("  %-10s  step %.3f s  (rollout %.3f s; waited %.3f s for rewards after it, %.1f of "
          "%d scored by then)" % (m, mean[m], rollout[m], statistics.mean(x for _, x in wait[m]),
                                  statistics.mean(k for k, _ in wait[m]),
                                  int(prompts) * int(group)))
print("  ratio serial / overlapped: %.2fx" % (mean["serial"] / mean["overlapped"]))
PY
