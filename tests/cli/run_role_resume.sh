#!/usr/bin/env bash
# An RLJob's pods evicted mid-run and made again, as Kueue's eviction does (issue 58), with the
# pods' processes (`tlt run-role`) on this machine over TCP: the trainer pod's process and its two
# rollout pods' get SIGTERM in the middle of the job (what Kubernetes sends when the operator
# deletes the pods), then all three start again (the pods made after readmission) with the same
# spec.checkpoint.path (a volume that outlives the pods).
# Checks: the trainer process exits 0 well within the default terminationGracePeriodSeconds
# (30 s) and leaves <spec.checkpoint.path>/tlt/latest at the step it reached: the last step it
# completed, written on SIGTERM when that step is not one of spec.checkpoint.everySteps (2), also
# when the signal cancelled the next step's policy update (an update stops only before its first
# optimizer step); the trainer process made again says it resumed after that step, runs only
# the steps after it, and the job's per-step rewards, tokens and held-out reward equal an
# uninterrupted local `tlt run` of the same job.
# Usage: run_role_resume.sh TLT_BINARY SOURCE_DIR
set -u
tlt=$1
src=$(cd "$2" && pwd)
fail() { echo "FAIL: run_role_resume: $*"; exit 1; }
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; wait 2>/dev/null; [[ -n ${KEEP:-} ]] || rm -rf "$work"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=$(free_port)
sync_port=$(free_port)
export TLT_WEIGHT_SYNC=gloo TLT_WEIGHT_SYNC_TIMEOUT_S=10
export TLT_JOB_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
steps=8
mk() {  # NAME: the e2e job with $steps steps, a checkpoint every 2, under $work/NAME
  sed -e "s|PLACEHOLDER|$work/$1|" -e "s|METRICSPORT|0|" -e "s|^    steps: 4$|    steps: $steps|" \
    -e "s|^    everySteps: 1$|    everySteps: 2|" \
    "$src/tests/manifests/e2e/rl-e2e.yaml" > "$work/$1.yaml"
}
mk local
mk pods
grep -q "everySteps: 2" "$work/pods.yaml" && grep -q "steps: $steps" "$work/pods.yaml" ||
  fail "tests/manifests/e2e/rl-e2e.yaml no longer has the lines this test edits"
TLT_WEIGHT_SYNC=file timeout 240 "$tlt" run "$work/local.yaml" > "$work/local.log" 2>&1 ||
  { tail "$work/local.log"; fail "local tlt run failed"; }

trainer_pod() {  # LOG: the trainer pod's process (trainer index 0), in the background
  env -u KUBECONFIG -u KUBERNETES_SERVICE_HOST TLT_JOB_FILE="$work/pods.yaml" TLT_ROLE=trainer \
    TLT_INDEX=0 TLT_NAMESPACE=research TLT_RENDEZVOUS_PORT="$port" \
    TLT_WEIGHT_SYNC_PORT="$sync_port" "$tlt" run-role > "$1" 2>&1 &
  trainer=$!
  pids+=($trainer)
}
rollout_pods() {  # SUFFIX: both rollout pods' processes, in the background
  rollouts=()
  for i in 0 1; do
    env TLT_JOB_FILE="$work/pods.yaml" TLT_ROLE=rollout TLT_INDEX=$i TLT_NAMESPACE=research \
      TLT_RENDEZVOUS_PORT="$port" TLT_TRAINER_ADDRESS=127.0.0.1 TLT_WORK_DIR="$work/pod-rollout-$i$1" \
      TLT_WEIGHT_SYNC_ADDRESS="127.0.0.1:$sync_port" \
      "$tlt" run-role > "$work/rollout-$i$1.log" 2>&1 &
    rollouts+=($!)
    pids+=($!)
  done
}
trainer_pod "$work/trainer.log"
rollout_pods ""
# Evict once step 3 is done: SIGTERM lands in step 4's rollouts (the checkpoint of step 3 is the
# signal's), in its policy update (cancelled before it changed the policy: step 3's again) or
# after it.
for _ in $(seq 6000); do
  grep -q "step=3/$steps" "$work/trainer.log" && break
  kill -0 $trainer 2>/dev/null || break
  sleep 0.02
done
grep -q "step=3/$steps" "$work/trainer.log" || { tail -20 "$work/trainer.log"; fail "step 3 did not finish in 120 s"; }
kill -TERM $trainer "${rollouts[@]}"
sent=$(date +%s.%N)
for _ in $(seq 600); do kill -0 $trainer 2>/dev/null || break; sleep 0.05; done
kill -0 $trainer 2>/dev/null && { tail -20 "$work/trainer.log"; fail "the trainer pod's process still runs 30 s after SIGTERM"; }
wait $trainer
rc=$?
took=$(python3 -c "import time; print('%.1f' % (time.time() - $sent))")
((rc == 0)) || { tail -20 "$work/trainer.log"; fail "the trainer pod's process exited $rc after SIGTERM"; }
for p in "${rollouts[@]}"; do
  for _ in $(seq 200); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
  kill -0 "$p" 2>/dev/null && fail "a rollout pod's process still runs 10 s after SIGTERM"
  wait "$p" 2>/dev/null
done
reached=$(sed -n 's/.*stopped by signal after step \([0-9]*\).*/\1/p' "$work/trainer.log" | tail -1)
[[ -n $reached ]] || { tail -20 "$work/trainer.log"; fail "the trainer did not say at which step it stopped"; }
((reached >= 3 && reached < steps)) || fail "stopped after step $reached, not between step 3 and the end"
expect=$reached
grep -q "checkpoint: $work/pods/tlt/step-$reached\$" "$work/trainer.log" ||
  { tail -20 "$work/trainer.log"; fail "no checkpoint of step $reached written on SIGTERM"; }
latest=$(cat "$work/pods/tlt/latest" 2>/dev/null)
[[ $latest == "step-$expect" ]] || fail "checkpoint latest is '$latest', expected step-$expect (stopped after step $reached)"

# The pods made again after readmission: the same job file, the same checkpoint volume.
trainer_pod "$work/trainer-2.log"
rollout_pods "-2"
for _ in $(seq 2400); do kill -0 $trainer 2>/dev/null || break; sleep 0.1; done
kill -0 $trainer 2>/dev/null && { tail -20 "$work/trainer-2.log"; fail "the resumed job did not finish in 240 s"; }
wait $trainer
rc=$?
((rc == 0)) || { tail -20 "$work/trainer-2.log"; fail "the resumed trainer pod's process exited $rc"; }
grep -q "resumed from $work/pods/tlt/step-$expect after step $expect" "$work/trainer-2.log" ||
  { head -20 "$work/trainer-2.log"; fail "the trainer pod made again did not resume after step $expect"; }
grep -q "step=$((expect + 1))/$steps" "$work/trainer-2.log" && ! grep -q "step=$expect/$steps" "$work/trainer-2.log" ||
  { grep "step=" "$work/trainer-2.log"; fail "the resumed trainer did not start at step $((expect + 1))"; }
python3 - "$work/local/report" "$work/pods/report" "$steps" <<'PY' || fail "the evicted and resumed job differs from an uninterrupted run"
import json, sys
a = json.load(open(sys.argv[1] + "/tlt.json")); b = json.load(open(sys.argv[2] + "/tlt.json"))
ka = [(s["step"], s["rewardMean"], s["tokens"], s["responseTokens"]) for s in a["steps"]]
kb = [(s["step"], s["rewardMean"], s["tokens"], s["responseTokens"]) for s in b["steps"]]
assert [k[0] for k in kb] == list(range(1, int(sys.argv[3]) + 1)), [k[0] for k in kb]
assert ka == kb, "steps differ:\n local   %s\n resumed %s" % (ka, kb)
ra, rb = json.load(open(sys.argv[1] + "/report.json")), json.load(open(sys.argv[2] + "/report.json"))
assert ra["tlt"]["heldOutRewardAfter"] == rb["tlt"]["heldOutRewardAfter"], (ra["tlt"], rb["tlt"])
print("rewards per step %s" % [round(k[1], 3) for k in kb])
PY
echo "PASS: run_role_resume: SIGTERM stopped the trainer pod after step $reached in $took s (exit 0)," \
  "the pod made again resumed after step $expect, all $steps steps equal an uninterrupted run"
