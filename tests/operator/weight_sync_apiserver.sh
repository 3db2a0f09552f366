#!/usr/bin/env bash
# The weight-sync group's port on a cluster (issue 43; operator/controller/desired.h), on a real
# etcd + kube-apiserver (scripts/k8s-env.sh) with kwok running a fake GPU node and the real
# tlt-operator under tests/operator/rbac.yaml:
#   1. an RLJob with 2 rollout pods, a trainer and a drafter pod: the headless Service <job>-rl
#      carries the ports "rendezvous" (29500), "weight-sync" (29501) and "trainer-group"
#      (29502); the "tlt" container of the trainer pod 0 declares the container ports
#      "weight-sync" (29501/TCP) and "trainer-group" (29502/TCP) and no other pod does; every pod's tlt container has TLT_WEIGHT_SYNC_PORT=29501 and
#      TLT_WEIGHT_SYNC_ADDRESS=<job>-trainer-0.<job>-rl.research.svc:29501 (the trainer pod's
#      DNS name under the Service it is the subdomain of, which the runtime joins the group at);
#   2. a TSTPretrainJob's Service <job>-tst carries the rendezvous port only.
# Stops every process it started (by PID) on exit, also on failure. Last line: PASS or FAIL.
# Usage: weight_sync_apiserver.sh TLT_OPERATOR_BINARY SOURCE_DIR   (K8S_BIN=DIR, KEEP=1)
set -euo pipefail
op=$1
src=$(cd "$2" && pwd)
source "$src/scripts/k8s-env.sh"

k8s_test_begin weight_sync_apiserver kwok
k8s_start_gpu_node
k8s_test_operator "$op" --watch-timeout 20

# ---- 1. an RLJob: the Service, the trainer pod's port, every pod's address ---------------------
JOB=synced
K8S_STEP="an RLJob with rollout, trainer and drafter pods"
kc apply -f - >/dev/null <<'YAML'
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata: {name: synced, namespace: research}
spec:
  roles: {rollout: {replicas: 2}, trainer: {replicas: 1}, drafter: {replicas: 1}}
YAML
wait_until 60 "the job's 4 pods were not created" has_pods $JOB 4
wait_until 60 "the job did not turn Running" phase_is rljob/$JOB Running
K8S_STEP="the Service's ports"
kc get service $JOB-rl -n research -o json >"$K8S_TMP/service.json"
python3 - "$K8S_TMP/service.json" <<'PY' || fail "the Service does not carry the weight-sync port"
import json, sys
svc = json.load(open(sys.argv[1]))
ports = {p["name"]: (p["port"], p["protocol"]) for p in svc["spec"]["ports"]}
assert ports == {"rendezvous": (29500, "TCP"), "weight-sync": (29501, "TCP"),
                 "trainer-group": (29502, "TCP")}, ports
assert svc["spec"]["clusterIP"] == "None", svc["spec"]
print("  service synced-rl: ports %s" % sorted(ports.items()))
PY
K8S_STEP="the pods' ports and env"
for pod in $JOB-trainer-0 $JOB-rollout-0 $JOB-rollout-1 $JOB-drafter-0; do
  kc get pod $pod -n research -o json >"$K8S_TMP/$pod.json"
  python3 - "$K8S_TMP/$pod.json" <<'PY' || fail "pod $pod: weight-sync port or address"
import json, sys
pod = json.load(open(sys.argv[1]))
name, spec = pod["metadata"]["name"], pod["spec"]
tlt = [c for c in spec["containers"] if c["name"] == "tlt"][0]
env = {e["name"]: e.get("value") for e in tlt["env"]}
assert env.get("TLT_WEIGHT_SYNC_PORT") == "29501", env
address = "synced-trainer-0.synced-rl.research.svc:29501"
assert env.get("TLT_WEIGHT_SYNC_ADDRESS") == address, env
assert env.get("TLT_SERVICE") == "synced-rl.research.svc", env
assert spec.get("subdomain") == "synced-rl", spec.get("subdomain")
ports = [(p.get("name"), p["containerPort"], p.get("protocol")) for c in spec["containers"]
         for p in c.get("ports", [])]
want = ([("weight-sync", 29501, "TCP"), ("trainer-group", 29502, "TCP")]
        if name == "synced-trainer-0" else [])
assert ports == want, "%s: container ports %s, expected %s" % (name, ports, want)
print("  %s: container ports %s; TLT_WEIGHT_SYNC_ADDRESS %s" % (name, ports, address))
PY
done

# ---- 2. a TSTPretrainJob: no weight-sync port --------------------------------------------------
K8S_STEP="a TSTPretrainJob's Service"
kc apply -f - >/dev/null <<'YAML'
apiVersion: tlt.dev/v1alpha1
kind: TSTPretrainJob
metadata: {name: pretrain, namespace: research}
spec:
  workers: {replicas: 2}
YAML
wait_until 60 "the TSTPretrainJob's 2 pods were not created" has_pods pretrain 2
names=$(kc get service pretrain-tst -n research -o 'jsonpath={.spec.ports[*].name}')
[[ $names == rendezvous ]] || fail "the TSTPretrainJob's Service has ports \"$names\""
k8s_say "pretrain-tst: ports $names"
k8s_test_finish "the Service's and the trainer pod's weight-sync port, every pod's" \
  "rendezvous address; none on a TSTPretrainJob"
