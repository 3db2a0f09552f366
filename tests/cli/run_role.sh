#!/usr/bin/env bash
# `tlt run-role`, what a cluster RLJob's pods run, as separate processes on this machine: the
# trainer pod's process (driver + coordinator + trainer, listening on the rendezvous port), two
# rollout pods' and one drafter pod's processes connecting to it over TCP, each with its own work
# directory (nothing shared on disk: weights, drafters and hidden-state buffers travel over the
# connections).
# Checks: the job completes; its rewards, response tokens and held-out reward equal a local
# `tlt run` of the same job (rollouts are reproducible per request seed whatever the placement);
# a rollout process killed mid-run and started again (a pod restart) rejoins and the step
# completes with the same results; the drafter pod trains the drafter in every step and never
# generates; a pod of an unknown role says clearly that it has nothing to run.
# Usage: run_role.sh TLT_BINARY SOURCE_DIR
set -u
tlt=$1
src=$(cd "$2" && pwd)
fail() { echo "FAIL: run_role: $*"; exit 1; }
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mk() {  # NAME: the e2e job with 6 steps and a drafter pod, its checkpoints under $work/NAME
  sed -e "s|PLACEHOLDER|$work/$1|" -e "s|METRICSPORT|0|" -e "s|^    steps: 4$|    steps: 6|" \
    -e "s|^      replicas: 2$|      replicas: 2\n    drafter:\n      replicas: 1|" \
    "$src/tests/manifests/e2e/rl-e2e.yaml" > "$work/$1.yaml"
}
mk local
mk pods
"$tlt" run "$work/local.yaml" > "$work/local.log" 2>&1 || { tail "$work/local.log"; fail "local tlt run failed"; }

pod() {  # ROLE INDEX LOG
  env TLT_JOB_FILE="$work/pods.yaml" TLT_ROLE="$1" TLT_INDEX="$2" TLT_NAMESPACE=research \
    TLT_RENDEZVOUS_PORT="$port" TLT_TRAINER_ADDRESS=127.0.0.1 TLT_WORK_DIR="$work/pod-$1-$2" \
    "$tlt" run-role > "$3" 2>&1 &
  pids+=($!)
}
rollout() { pod rollout "$@"; }
env -u KUBECONFIG -u KUBERNETES_SERVICE_HOST TLT_JOB_FILE="$work/pods.yaml" TLT_ROLE=trainer \
  TLT_INDEX=0 TLT_NAMESPACE=research TLT_RENDEZVOUS_PORT="$port" \
  TLT_FAULT_KILL_WORKER= "$tlt" run-role > "$work/trainer.log" 2>&1 &
trainer=$!
pids+=($trainer)
pod drafter 0 "$work/drafter-0.log"
rollout 0 "$work/rollout-0.log"
rollout 1 "$work/rollout-1.log"
victim=${pids[-1]}
# A pod restart: once step 2 is under way, kill rollout 1 and start it again a second later.
for _ in $(seq 600); do grep -q "step=2/" "$work/trainer.log" && break; kill -0 $trainer 2>/dev/null || break; sleep 0.1; done
kill -9 "$victim" 2>/dev/null
wait "$victim" 2>/dev/null
sleep 1
rollout 1 "$work/rollout-1b.log"
wait $trainer
rc=$?
((rc == 0)) || { tail -20 "$work/trainer.log"; fail "the trainer pod's process exited $rc"; }
for i in 0 1b; do
  grep -q "connected" "$work/rollout-$i.log" || { cat "$work/rollout-$i.log"; fail "rollout $i never connected"; }
done
grep -q "rollout worker 1 died" "$work/trainer.log" || fail "the trainer did not see rollout 1 die"
[[ $(grep -c "rollout worker 1 connected" "$work/trainer.log") -ge 2 ]] || fail "rollout 1 did not rejoin"
[[ -n $(ls "$work/pod-rollout-0"/policy* 2>/dev/null) ]] || fail "no policy file reached rollout 0's directory"
python3 - "$work/local/report" "$work/pods/report" <<'PY' || fail "the pods' run differs from the local run"
import json, sys
a = json.load(open(sys.argv[1] + "/tlt.json")); b = json.load(open(sys.argv[2] + "/tlt.json"))
ka = [(s["step"], s["rewardMean"], s["tokens"], s["responseTokens"]["max"]) for s in a["steps"]]
kb = [(s["step"], s["rewardMean"], s["tokens"], s["responseTokens"]["max"]) for s in b["steps"]]
assert ka == kb, "steps differ:\n local %s\n pods  %s" % (ka, kb)
ra, rb = json.load(open(sys.argv[1] + "/report.json")), json.load(open(sys.argv[2] + "/report.json"))
assert ra["tlt"]["heldOutRewardAfter"] == rb["tlt"]["heldOutRewardAfter"], (ra, rb)
assert sum(s["drafterSteps"] for s in b["steps"]) > 0, "the rollout pods trained no drafter"
for run in (a, b):
    assert all(s["drafterWorkers"] == [2] for s in run["steps"]), [s["drafterWorkers"] for s in run["steps"]]
    for s in run["steps"]:
        gen = [i for i in s["timeline"] if i["worker"] == 2 and i["state"] == "generating"]
        assert not any(i["end"] - i["start"] > 0 for i in gen), "the drafter pod generated"
print("run_role: %d steps identical to the local run (rewards %s); held-out %.4f; drafter steps %d"
      % (len(kb), [round(k[1], 3) for k in kb], rb["tlt"]["heldOutRewardAfter"],
         sum(s["drafterSteps"] for s in b["steps"])))
PY
grep -q "connected" "$work/drafter-0.log" || { cat "$work/drafter-0.log"; fail "the drafter pod never connected"; }
env TLT_JOB_FILE="$work/pods.yaml" TLT_ROLE=evaluator TLT_INDEX=0 "$tlt" run-role > "$work/odd.log" 2>&1
rc=$?
((rc == 69)) && grep -q "has nothing to run" "$work/odd.log" ||
  { cat "$work/odd.log"; fail "a pod of an unknown role exited $rc without saying why"; }
echo "PASS: run_role"
