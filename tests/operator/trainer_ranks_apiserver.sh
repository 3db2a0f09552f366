#!/usr/bin/env bash
# Trainer ranks on a cluster (issue 56; operator/controller/desired.h, trainer_world.h), on a real
# etcd + kube-apiserver (scripts/k8s-env.sh) with kwok running a fake GPU node and the real
# tlt-operator under tests/operator/rbac.yaml:
#   1. an RLJob with spec.roles.trainer.replicas 2: pods <job>-trainer-0 and -1, each with its
#      rank (TLT_INDEX), TLT_TRAINER_WORLD=2, TLT_TRAINER_GROUP_PORT=29502 and
#      TLT_TRAINER_GROUP_ADDRESS=<job>-trainer-0.<job>-rl.research.svc:29502 and the label
#      tlt.dev/trainer-world=2; trainer pod 0 declares the container port "trainer-group"
#      (29502/TCP), and the headless Service carries it;
#   2. more ranks than prompts in a step (replicas 5, promptsPerStep 4): the CRD refuses the
#      edit, naming spec.roles.trainer.replicas;
#   3. replicas edited to 3 while it runs: no third trainer pod; condition TrainerScalePending
#      True (reason WorldSizeFixed) naming the field and the way out, a Warning Event; the
#      ConfigMap's job.json keeps 2;
#   4. suspended and resumed: three trainer pods with TLT_TRAINER_WORLD=3, the condition False.
# Stops every process it started (by PID) on exit, also on failure. Last line: PASS or FAIL.
# Usage: trainer_ranks_apiserver.sh TLT_OPERATOR_BINARY SOURCE_DIR   (K8S_BIN=DIR, KEEP=1)
set -euo pipefail
op=$1
src=$(cd "$2" && pwd)
source "$src/scripts/k8s-env.sh"

k8s_test_begin trainer_ranks_apiserver kwok
k8s_start_gpu_node
k8s_test_operator "$op" --watch-timeout 20

JOB=ranks
trainer_pods() { kc get pods -n research -l "tlt.dev/job=$JOB,tlt.dev/role=trainer" -o name | wc -l; }
# check_rank POD RANK WORLD: the pod's rank, world, group address, label and container ports.
check_rank() {
  kc get pod "$1" -n research -o json >"$K8S_TMP/$1.json"
  python3 - "$K8S_TMP/$1.json" "$2" "$3" <<'PY' || fail "pod $1: rank $2 of $3"
import json, sys
pod, rank, world = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
tlt = [c for c in pod["spec"]["containers"] if c["name"] == "tlt"][0]
env = {e["name"]: e.get("value") for e in tlt["env"]}
want = {"TLT_INDEX": rank, "TLT_TRAINER_WORLD": world, "TLT_TRAINER_GROUP_PORT": "29502",
        "TLT_TRAINER_GROUP_ADDRESS": "ranks-trainer-0.ranks-rl.research.svc:29502"}
got = {k: env.get(k) for k in want}
assert got == want, got
assert pod["metadata"]["labels"].get("tlt.dev/trainer-world") == world, pod["metadata"]["labels"]
ports = [(p.get("name"), p["containerPort"]) for p in tlt.get("ports", [])]
has_group = ("trainer-group", 29502) in ports
assert has_group == (rank == "0"), ports
print("  %s: rank %s of %s, container ports %s" % (pod["metadata"]["name"], rank, world, ports))
PY
}

# ---- 1. two trainer ranks -----------------------------------------------------------------------
K8S_STEP="an RLJob with two trainer ranks"
kc apply -f - >/dev/null <<'YAML'
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata: {name: ranks, namespace: research}
spec:
  algorithm: {promptsPerStep: 4, groupSize: 4}
  roles: {rollout: {replicas: 1}, trainer: {replicas: 2}}
YAML
wait_until 60 "the job's 3 pods were not created" has_pods $JOB 3
wait_until 60 "the job did not turn Running" phase_is rljob/$JOB Running
check_rank $JOB-trainer-0 0 2
check_rank $JOB-trainer-1 1 2
K8S_STEP="the Service's trainer-group port"
port=$(kc get service $JOB-rl -n research -o 'jsonpath={.spec.ports[?(@.name=="trainer-group")].port}')
[[ $port == 29502 ]] || fail "the Service's trainer-group port is \"$port\""
k8s_say "two ranks: rank, world 2 and the group address on each; trainer-group 29502 on the Service"

# ---- 2. more ranks than prompts in a step: refused by the CRD -----------------------------------
K8S_STEP="replicas 5 with promptsPerStep 4"
if kc patch rljob $JOB -n research --type merge -p '{"spec":{"roles":{"trainer":{"replicas":5}}}}' \
  >"$K8S_TMP/refused.out" 2>&1; then
  fail "the CRD accepted 5 trainer ranks for 4 prompts per step"
fi
grep -q "spec.roles.trainer.replicas" "$K8S_TMP/refused.out" ||
  fail "the refusal does not name spec.roles.trainer.replicas: $(cat "$K8S_TMP/refused.out")"
k8s_say "refused: $(grep -o 'spec.roles.trainer.replicas[^"]*' "$K8S_TMP/refused.out" | head -1)"

# ---- 3. a scale while it runs: the world is kept, the condition says so -------------------------
K8S_STEP="replicas edited to 3 while running"
kc patch rljob $JOB -n research --type merge -p '{"spec":{"roles":{"trainer":{"replicas":3}}}}' >/dev/null
pending_is() { [[ $(cond rljob/$JOB TrainerScalePending status) == "$1" ]]; }
wait_until 30 "condition TrainerScalePending did not turn True" pending_is True
[[ $(cond rljob/$JOB TrainerScalePending reason) == WorldSizeFixed ]] ||
  fail "reason $(cond rljob/$JOB TrainerScalePending reason)"
message=$(cond rljob/$JOB TrainerScalePending message)
[[ $message == *"spec.roles.trainer.replicas is 3, but the running trainer group has 2"* &&
  $message == *"suspended and resumed"* ]] || fail "condition message: $message"
warned() { [[ $(events $JOB TrainerScalePending) == "Warning: "* ]]; }
wait_until 10 "no Warning Event TrainerScalePending" warned
sleep 2  # (a pod the operator wrongly made would show by now)
[[ $(trainer_pods) == 2 ]] || fail "$(trainer_pods) trainer pods while the world is 2"
replicas=$(kc get configmap $JOB-rl-spec -n research -o 'jsonpath={.data.job\.json}' |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["spec"]["roles"]["trainer"]["replicas"])')
[[ $replicas == 2 ]] || fail "the ConfigMap's job.json says $replicas trainer replicas"
[[ $(phase rljob/$JOB) == Running ]] || fail "phase $(phase rljob/$JOB) while the two ranks run"
k8s_say "scale held: $message"

# ---- 4. suspend and resume: the new world -------------------------------------------------------
K8S_STEP="suspend"
kc patch rljob $JOB -n research --type merge -p '{"spec":{"suspend":true}}' >/dev/null
wait_until 60 "the pods were not deleted on suspend" has_pods $JOB 0
K8S_STEP="resume"
kc patch rljob $JOB -n research --type merge -p '{"spec":{"suspend":false}}' >/dev/null
three_ranks() { [[ $(trainer_pods) == 3 ]]; }
wait_until 60 "three trainer pods were not created on resume" three_ranks
for r in 0 1 2; do check_rank $JOB-trainer-$r $r 3; done
wait_until 30 "condition TrainerScalePending did not turn False" pending_is False
[[ $(cond rljob/$JOB TrainerScalePending reason) == WorldMatchesSpec ]] ||
  fail "reason $(cond rljob/$JOB TrainerScalePending reason)"
k8s_test_finish "two ranks with rank, world and group address; more ranks than prompts refused" \
  "by the CRD; a scale while running held with TrainerScalePending; 3 ranks after suspend/resume"
