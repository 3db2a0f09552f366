#!/usr/bin/env bash
# `tlt run-role`, what a cluster RLJob's pods run, as separate processes on this machine: the
# trainer pod's process (driver + coordinator + trainer, listening on the rendezvous port), two
# rollout pods' and one drafter pod's processes connecting to it over TCP, each with its own work
# directory (nothing shared on disk: weights, drafters and hidden-state buffers travel over the
# connections).
# Checks: the job completes; its rewards, response tokens and held-out reward equal a local
# `tlt run` of the same job (rollouts are reproducible per request seed whatever the placement);
# a rollout process killed mid-run and started again (a pod restart) rejoins and the step
# completes with the same results; the drafter pod trains the drafter and never generates; a
# drafter pod added mid-job (the rebalancer raising spec.roles.drafter.replicas to 2) joins at a
# step boundary and trains, and the first drafter pod killed mid-job (a scale-down deleting it)
# does not block a step: the job goes on with the other; a pod of an unknown role says clearly
# that it has nothing to run.
# The pods' policy and drafter weights travel over the weight-sync group (TLT_WEIGHT_SYNC=gloo,
# the trainer's store on TLT_WEIGHT_SYNC_PORT, the pods joining at TLT_WEIGHT_SYNC_ADDRESS, as the
# operator sets them): no policy file travels to a rollout pod that stays up; a pod that joins
# (drafter pod 1, the restarted rollout pod) or leaves (drafter pod 0) makes a new group
# generation at the next step boundary; the group is never let go and no publish is refused.
# Usage: run_role.sh TLT_BINARY SOURCE_DIR
set -u
tlt=$1
src=$(cd "$2" && pwd)
fail() { echo "FAIL: run_role: $*"; exit 1; }
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; [[ -n ${KEEP:-} ]] || rm -rf "$work"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=$(free_port)
sync_port=$(free_port)
export TLT_WEIGHT_SYNC=gloo TLT_WEIGHT_SYNC_TIMEOUT_S=10
# The job's secret, as the operator mounts it in every pod: the trainer checks each pod's hello.
export TLT_JOB_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
mk() {  # NAME: the e2e job with 6 steps and a drafter pod, its checkpoints under $work/NAME
  sed -e "s|PLACEHOLDER|$work/$1|" -e "s|METRICSPORT|0|" -e "s|^    steps: 4$|    steps: 6|" \
    -e "s|^      replicas: 2$|      replicas: 2\n    drafter:\n      replicas: 1|" \
    "$src/tests/manifests/e2e/rl-e2e.yaml" > "$work/$1.yaml"
}
mk local
mk pods
TLT_WEIGHT_SYNC=file "$tlt" run "$work/local.yaml" > "$work/local.log" 2>&1 || { tail "$work/local.log"; fail "local tlt run failed"; }

pod() {  # ROLE INDEX LOG
  env TLT_JOB_FILE="$work/pods.yaml" TLT_ROLE="$1" TLT_INDEX="$2" TLT_NAMESPACE=research \
    TLT_RENDEZVOUS_PORT="$port" TLT_TRAINER_ADDRESS=127.0.0.1 TLT_WORK_DIR="$work/pod-$1-$2" \
    TLT_WEIGHT_SYNC_ADDRESS="127.0.0.1:$sync_port" \
    "$tlt" run-role > "$3" 2>&1 &
  pids+=($!)
}
rollout() { pod rollout "$@"; }
env -u KUBECONFIG -u KUBERNETES_SERVICE_HOST TLT_JOB_FILE="$work/pods.yaml" TLT_ROLE=trainer \
  TLT_INDEX=0 TLT_NAMESPACE=research TLT_RENDEZVOUS_PORT="$port" TLT_WEIGHT_SYNC_PORT="$sync_port" \
  TLT_FAULT_KILL_WORKER= "$tlt" run-role > "$work/trainer.log" 2>&1 &
trainer=$!
pids+=($trainer)
pod drafter 0 "$work/drafter-0.log"
drafter0=${pids[-1]}
rollout 0 "$work/rollout-0.log"
rollout 1 "$work/rollout-1.log"
victim=${pids[-1]}
until_log() {  # PATTERN: waits (up to 60 s) until the trainer's log has it, or the trainer exits
  for _ in $(seq 600); do grep -q "$1" "$work/trainer.log" && break; kill -0 $trainer 2>/dev/null || break; sleep 0.1; done
}
# The rebalancer adds a drafter pod: once step 1 is done, drafter pod 1 starts.
until_log "step=1/"
pod drafter 1 "$work/drafter-1.log"
# A pod restart: once step 3 is under way, kill rollout 1 and start it again a second later.
until_log "step=2/"
kill -9 "$victim" 2>/dev/null
wait "$victim" 2>/dev/null
sleep 1
rollout 1 "$work/rollout-1b.log"
# A scale-down deletes drafter pod 0 as soon as drafter pod 1 trains.
until_log "drafter pod 1 (worker 3) joined"
kill -9 "$drafter0" 2>/dev/null
wait "$drafter0" 2>/dev/null
wait $trainer
rc=$?
((rc == 0)) || { tail -20 "$work/trainer.log"; fail "the trainer pod's process exited $rc"; }
for i in 0 1b; do
  grep -q "connected" "$work/rollout-$i.log" || { cat "$work/rollout-$i.log"; fail "rollout $i never connected"; }
done
grep -q "rollout worker 1 died" "$work/trainer.log" || fail "the trainer did not see rollout 1 die"
joined=$(sed -n 's/.*drafter pod 1 (worker 3) joined at step \([0-9]*\).*/\1/p' "$work/trainer.log" | head -1)
[[ -n $joined ]] || fail "drafter pod 1 never joined"
grep -q "drafter pod 0 (worker 2) left" "$work/trainer.log" || fail "the trainer did not drop drafter pod 0"
[[ $(grep -c "rollout worker 1 connected" "$work/trainer.log") -ge 2 ]] || fail "rollout 1 did not rejoin"
grep -q "weight sync: Gloo group of 3 ranks on port $sync_port" "$work/trainer.log" ||
  { tail -20 "$work/trainer.log"; fail "the trainer opened no weight-sync group"; }
# Generations: the drafter pod of the start joins at step 1, drafter pod 1 when it is admitted, the
# restarted rollout pod at the next boundary, and drafter pod 0 leaves when it is dropped. Where
# a kill lands in a publish or a regroup varies: that generation breaks or does not form (the
# step goes on over the files), and the next boundary forms one of the members left.
grep -q "ranks (workers 0,1,3) on port $sync_port" "$work/trainer.log" ||
  { grep "weight sync" "$work/trainer.log"; fail "no group generation with drafter pod 1 and without drafter pod 0"; }
sed -n '/rollout worker 1 died/,$p' "$work/trainer.log" | grep -q "weight sync: group generation" ||
  { grep "weight sync\|died" "$work/trainer.log"; fail "the restarted rollout pod joined no new group generation"; }
if grep -q "load checkpoint files from now on" "$work/trainer.log"; then
  tail -20 "$work/trainer.log"; fail "the weight-sync group was let go"
fi
# A policy file travels to rollout 0 only for a step whose generation broke or did not form.
broke=$(grep -c "weight sync: generation .*the workers load checkpoint files" "$work/trainer.log")
files=$(ls "$work/pod-rollout-0"/policy* 2>/dev/null | wc -l)
((files <= broke)) ||
  fail "$files policy files travelled to rollout 0 with $broke generations broken or not formed"
python3 - "$work/local/report" "$work/pods/report" "$joined" <<'PY' || fail "the pods' run differs from the local run"
import json, sys
a = json.load(open(sys.argv[1] + "/tlt.json")); b = json.load(open(sys.argv[2] + "/tlt.json"))
ka = [(s["step"], s["rewardMean"], s["tokens"], s["responseTokens"]["max"]) for s in a["steps"]]
kb = [(s["step"], s["rewardMean"], s["tokens"], s["responseTokens"]["max"]) for s in b["steps"]]
assert ka == kb, "steps differ:\n local %s\n pods  %s" % (ka, kb)
ra, rb = json.load(open(sys.argv[1] + "/report.json")), json.load(open(sys.argv[2] + "/report.json"))
assert ra["tlt"]["heldOutRewardAfter"] == rb["tlt"]["heldOutRewardAfter"], (ra, rb)
assert sum(s["drafterSteps"] for s in b["steps"]) > 0, "the rollout pods trained no drafter"
assert all(s.get("weightSyncRefused", -1) == 0 for s in b["steps"]), [s.get("weightSyncRefused") for s in b["steps"]]
assert all(s["drafterWorkers"] == [2] for s in a["steps"]), [s["drafterWorkers"] for s in a["steps"]]
# The pods: drafter pod 0 (worker 2) until drafter pod 1 (worker 3) joins at step J, both in
# step J (drafter pod 0 is killed during it), drafter pod 1 alone after.
joined, dw = int(sys.argv[3]), [s["drafterWorkers"] for s in b["steps"]]
assert 2 <= joined <= len(dw), (joined, dw)
assert all(w == [2] for w in dw[:joined - 1]), dw
assert 3 in dw[joined - 1], dw
assert all(w == [3] for w in dw[joined:]), dw
assert dw[-1] == [3], "drafter pod 0 left but the job still counts it: %s" % dw
trained_late = sum(1 for s in b["steps"][joined - 1:] for i in s["timeline"]
                   if i["worker"] == 3 and i["state"] == "training" and i["end"] > i["start"])
assert trained_late > 0, "drafter pod 1 joined but never trained"
for run in (a, b):
    for s in run["steps"]:
        gen = [i for i in s["timeline"] if i["worker"] >= 2 and i["state"] == "generating"]
        assert not any(i["end"] - i["start"] > 0 for i in gen), "a drafter pod generated"
print("run_role: %d steps identical to the local run (rewards %s); held-out %.4f; drafter steps %d;"
      " drafter workers per step %s" % (len(kb), [round(k[1], 3) for k in kb],
      rb["tlt"]["heldOutRewardAfter"], sum(s["drafterSteps"] for s in b["steps"]), dw))
PY
grep -q "connected" "$work/drafter-0.log" || { cat "$work/drafter-0.log"; fail "the drafter pod never connected"; }
env TLT_JOB_FILE="$work/pods.yaml" TLT_ROLE=evaluator TLT_INDEX=0 "$tlt" run-role > "$work/odd.log" 2>&1
rc=$?
((rc == 69)) && grep -q "has nothing to run" "$work/odd.log" ||
  { cat "$work/odd.log"; fail "a pod of an unknown role exited $rc without saying why"; }
echo "PASS: run_role"
