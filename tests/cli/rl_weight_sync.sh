#!/usr/bin/env bash
# Weights over the weight-sync group (TLT_WEIGHT_SYNC=gloo, runtime/rl/weight_sync.h) against the
# checkpoint files (TLT_WEIGHT_SYNC=file), both through `tlt run`:
#   1. micro preset (tests/manifests/e2e/rl-e2e.yaml, 3 steps): the per-step rewards, response
#      lengths and token counts are identical, and no publish is refused;
#   2. a publish corrupted on purpose (TLT_WEIGHT_SYNC_CORRUPT=1: one byte of policy v1's first
#      bucket) is refused by both workers and counted in step 2's weightSyncRefused; they load
#      the file instead, so the rollouts are still identical;
#   3. a rollout worker killed mid-step 2 (TLT_FAULT_KILL_WORKER) is restarted (it loads the files
#      for the rest of step 2); at the next step boundary every worker joins a new generation of
#      the group, and the rollouts are still identical;
#   4. the tiny Hugging Face llama (tests/models/fixtures, 2 steps): identical;
#   5. TLT_WEIGHT_SYNC=nccl on this CPU build is refused with a message naming the fix.
# Usage: rl_weight_sync.sh TLT_BINARY SOURCE_DIR
set -u
tlt=$1; src=$2
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
micro() {  # micro NAME -> a 3-step manifest of its own
  sed -e "s|PLACEHOLDER|$work/$1|" -e "s|METRICSPORT|0|" -e "s|steps: 4|steps: 3|" \
    "$src/tests/manifests/e2e/rl-e2e.yaml" > "$work/$1.yaml"
}
llama() {  # llama NAME -> a 2-step manifest on the tiny llama
  cat > "$work/$1.yaml" <<YAML
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata: {name: $1}
spec:
  model: {path: $src/tests/models/fixtures/tiny-llama-hf}
  task: {name: arithmetic-cot, seed: 1, heldOut: 8}
  algorithm: {steps: 2, promptsPerStep: 4, groupSize: 4, maxResponseTokens: 24,
              learningRate: 1.0e-3, klCoef: 0.01, seed: 0}
  roles: {rollout: {replicas: 2}}
  speculative: {activationThreshold: 16, arms: ["4_1_5", "ngram"]}
  drafter: {vocabSubset: 16, warmStartSteps: 5, warmStartPrompts: 6, trainLevels: 2,
            training: {batchSize: 8}}
  checkpoint: {path: $work/$1, everySteps: 1}
  metrics: {port: 0}
YAML
}
run() {  # run NAME MODE [ENV=VALUE...]
  local name=$1 mode=$2; shift 2
  env TLT_WEIGHT_SYNC="$mode" TLT_CACHE="$work/cache" "$@" timeout 600 "$tlt" run "$work/$name.yaml" \
    > "$work/$name.log" 2>&1 || { cat "$work/$name.log"; fail "$name ($mode) exited $?"; }
}

micro nccl  # the CPU flavour has no NCCL: refused with the fix, before any step
if env TLT_WEIGHT_SYNC=nccl TLT_CACHE="$work/cache" timeout 120 "$tlt" run "$work/nccl.yaml" > "$work/nccl.log" 2>&1; then
  cat "$work/nccl.log"; fail "TLT_WEIGHT_SYNC=nccl ran on a CPU build"
fi
grep -q "TLT_WEIGHT_SYNC=nccl needs the GPU flavour" "$work/nccl.log" || { cat "$work/nccl.log"; fail "nccl: no clear refusal"; }
micro file; run file file
micro gloo; run gloo gloo
micro bad; run bad gloo TLT_WEIGHT_SYNC_CORRUPT=1
micro kill; run kill gloo TLT_FAULT_KILL_WORKER=2
llama lfile; run lfile file
llama lgloo; run lgloo gloo
for n in gloo bad kill lgloo; do
  grep -q "weight sync: Gloo group of 3 ranks" "$work/$n.log" || { cat "$work/$n.log"; fail "$n: no weight-sync group"; }
done
for n in gloo bad kill lgloo; do
  if grep -q "load checkpoint files from now on" "$work/$n.log"; then cat "$work/$n.log"; fail "$n: the group was let go"; fi
done
grep -q "died" "$work/kill.log" || { cat "$work/kill.log"; fail "the worker was not killed"; }
grep -q "weight sync: group generation 2 of 3 ranks" "$work/kill.log" || { cat "$work/kill.log"; fail "kill: no new group generation"; }
grep -q "weight sync refused policy v1: bucket 0 of" "$work/bad.log" || { cat "$work/bad.log"; fail "bad: no refusal logged"; }
python3 - "$work" <<'PY' || exit 1
import json, sys
w = sys.argv[1]
def fail(m): print("FAIL:", m); sys.exit(1)
def steps(n): return json.load(open("%s/%s/report/tlt.json" % (w, n)))["steps"]
for ref, others, count in (("file", ("gloo", "bad", "kill"), 3), ("lfile", ("lgloo",), 2)):
    a = steps(ref)
    if len(a) != count: fail("%s: %d steps" % (ref, len(a)))
    for n in others:
        b = steps(n)
        if len(b) != count: fail("%s: %d steps" % (n, len(b)))
        for x, y in zip(a, b):
            for k in ("rewardMean", "responseTokens", "tokens"):
                if x[k] != y[k]: fail("%s step %d %s: %s vs file %s" % (n, x["step"], k, y[k], x[k]))
for n in ("gloo", "kill", "lgloo"):
    if any(s.get("weightSyncRefused", -1) != 0 for s in steps(n)):
        fail("%s: refused publishes %s" % (n, [s.get("weightSyncRefused") for s in steps(n)]))
refused = [s["weightSyncRefused"] for s in steps("bad")]
if refused != [0, 2, 0]: fail("bad: refused by step %s, expected [0, 2, 0]" % refused)
print("weight sync: Gloo and file rollouts identical (micro 3 steps, tiny llama 2 steps); "
      "a corrupt bucket refused by both workers; a killed worker rejoins a new generation")
PY
