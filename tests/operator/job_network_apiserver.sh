#!/usr/bin/env bash
# The job's network surface (issue 51; operator/controller/job_network.h) on a real etcd +
# kube-apiserver (scripts/k8s-env.sh) with kwok and the real tlt-operator under
# tests/operator/rbac.yaml, in a namespace that enforces the restricted Pod Security Standard
# (the apiserver's own Pod Security and ServiceAccount admission judge the pods):
#   1. an RLJob with a reward sidecar gets a Secret <job>-rl-secret (ownerReference to the job,
#      immutable, 64 hex digits under `secret`) and a NetworkPolicy <job>-rl (ownerReference;
#      the job's pods, ingress from the job's pods and on the metrics port only); a
#      TSTPretrainJob gets <job>-tst-secret in its workers' tlt containers and <job>-tst;
#   2. its pods: automountServiceAccountToken false; the Secret mounted read-only into the
#      `tlt` container only, with TLT_JOB_SECRET_FILE; the trainer's apiserver token a projected
#      volume in `tlt` only: no other container (the reward sidecar) has anything at
#      /var/run/secrets/kubernetes.io/serviceaccount, after admission too;
#   3. reconciles (an edit of the job, a deleted pod recreated) leave the Secret as it was (same
#      data, same resourceVersion) and do not rewrite the NetworkPolicy;
#   4. a Secret of the job's name made by someone else: the job Failed, reason
#      JobSecretNotOwned, no pods, that Secret untouched;
#   5. deleting the job deletes its Secret and NetworkPolicy (the operator's finalizer; no
#      garbage collector runs here);
#   6. a bad --network-policy-metrics-from stops the operator naming the flag and the fix; with
#      --job-network-policy=false the jobs' NetworkPolicies are deleted, their Secrets kept.
# kwok runs no network plugin: that the NetworkPolicy is enforced is not tested here (it is the
# plugin's job); what it selects and allows is.
# Stops every process it started (by PID) on exit, also on failure. Last line: PASS or FAIL.
# Usage: job_network_apiserver.sh TLT_OPERATOR_BINARY SOURCE_DIR   (K8S_BIN=DIR, KEEP=1)
set -euo pipefail
op=$1
src=$(cd "$2" && pwd)
source "$src/scripts/k8s-env.sh"

k8s_test_begin job_network_apiserver kwok
k8s_start_gpu_node
k8s_test_operator "$op" --watch-timeout 20

NS=strict
K8S_STEP="a namespace enforcing the restricted Pod Security Standard"
kc create namespace $NS >/dev/null
kc label namespace $NS pod-security.kubernetes.io/enforce=restricted \
  pod-security.kubernetes.io/enforce-version=latest >/dev/null
gone() { ! kc get "$1" -n $NS >/dev/null 2>&1; }

# ---- 1. the Secret and the NetworkPolicy ---------------------------------------------------------
JOB=guarded
K8S_STEP="an RLJob with a reward sidecar"
kc apply -f - >/dev/null <<'YAML'
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata: {name: guarded, namespace: strict}
spec:
  roles: {rollout: {replicas: 1}, trainer: {replicas: 1}}
  reward:
    type: command
    container: {image: registry.invalid/reward:1, command: [python3, /app/reward.py]}
YAML
wait_until 60 "the job's 2 pods were not created (Pod Security or ServiceAccount admission?)" \
  has_pods $JOB 2 $NS
wait_until 60 "the job did not turn Running" phase_is rljob/$JOB Running $NS
uid=$(kc get rljob $JOB -n $NS -o 'jsonpath={.metadata.uid}')
K8S_STEP="the Secret and the NetworkPolicy"
kc get secret $JOB-rl-secret -n $NS -o json >"$K8S_TMP/secret.json" || fail "no Secret $JOB-rl-secret"
kc get networkpolicy $JOB-rl -n $NS -o json >"$K8S_TMP/netpol.json" ||
  fail "no NetworkPolicy $JOB-rl"
python3 - "$K8S_TMP/secret.json" "$K8S_TMP/netpol.json" "$uid" <<'PY' || fail "their shape (above)"
import base64, json, re, sys
secret, netpol, uid = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
for o in (secret, netpol):
    (ref,) = o["metadata"]["ownerReferences"]
    assert ref["uid"] == uid and ref["kind"] == "RLJob" and ref["controller"], ref
assert secret["immutable"] is True and secret["type"] == "Opaque", secret
value = base64.b64decode(secret["data"]["secret"]).decode()
assert re.fullmatch("[0-9a-f]{64}", value), "not 64 hex digits"
assert list(secret["data"]) == ["secret"], list(secret["data"])
pods = {"matchLabels": {"tlt.dev/job": "guarded", "tlt.dev/kind": "RLJob"}}
spec = netpol["spec"]
assert spec["podSelector"] == pods and spec["policyTypes"] == ["Ingress"], spec
assert spec["ingress"] == [
    {"from": [{"podSelector": pods}]},
    {"from": [{"namespaceSelector": {}}], "ports": [{"protocol": "TCP", "port": 9400}]}], spec
print("  secret guarded-rl-secret: owned, immutable, 64 hex digits; networkpolicy guarded-rl: "
      "the job's pods from the job's pods, 9400 from any namespace")
PY

# ---- 2. the pods: secret and token in tlt only ----------------------------------------------------
K8S_STEP="the pods' volumes and mounts"
for pod in $JOB-trainer-0 $JOB-rollout-0; do
  kc get pod $pod -n $NS -o json >"$K8S_TMP/$pod.json"
  python3 - "$K8S_TMP/$pod.json" <<'PY' || fail "pod $pod: where the secret and token are (above)"
import json, sys
pod = json.load(open(sys.argv[1]))
name, spec = pod["metadata"]["name"], pod["spec"]
assert spec["automountServiceAccountToken"] is False, spec.get("automountServiceAccountToken")
volumes = {v["name"]: v for v in spec["volumes"]}
assert volumes["tlt-job-secret"]["secret"]["secretName"] == "guarded-rl-secret", volumes
trainer = name == "guarded-trainer-0"
assert ("tlt-token" in volumes) == trainer, sorted(volumes)
if trainer:
    sources = volumes["tlt-token"]["projected"]["sources"]
    assert sources[0]["serviceAccountToken"]["path"] == "token", sources
# What holds a token or the secret: the operator's volumes, and any other projected token
# (ServiceAccount admission injects kube-api-access-* where automount is on).
holders = {v for v, body in volumes.items()
           if v in ("tlt-job-secret", "tlt-token") or any(
               "serviceAccountToken" in s for s in body.get("projected", {}).get("sources", []))}
sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount"
containers = spec["containers"] + spec.get("initContainers", [])
assert trainer == ("reward" in [c["name"] for c in containers]), [c["name"] for c in containers]
for c in containers:
    mounts = c.get("volumeMounts", [])
    held = sorted(m["name"] for m in mounts if m["name"] in holders or m["mountPath"] == sa_dir)
    env = {e["name"]: e.get("value") for e in c.get("env", [])}
    if c["name"] != "tlt":
        assert held == [], "%s/%s holds %s" % (name, c["name"], held)
        assert "TLT_JOB_SECRET_FILE" not in env, c["name"]
        continue
    assert held == (["tlt-job-secret", "tlt-token"] if trainer else ["tlt-job-secret"]), held
    for m in mounts:
        if m["name"] in holders:
            assert m.get("readOnly") is True, m
    by_name = {m["name"]: m["mountPath"] for m in mounts}
    assert by_name["tlt-job-secret"] == "/var/run/secrets/tlt.dev/job", by_name
    assert not trainer or by_name["tlt-token"] == sa_dir, by_name
    assert env.get("TLT_JOB_SECRET_FILE") == "/var/run/secrets/tlt.dev/job/secret", env
print("  %s: automount false; %s in tlt only; containers %s" % (
    name, " and ".join(sorted(holders)), [c["name"] for c in containers]))
PY
done

K8S_STEP="a TSTPretrainJob's Secret, NetworkPolicy and pods"
kc apply -f - >/dev/null <<'YAML'
apiVersion: tlt.dev/v1alpha1
kind: TSTPretrainJob
metadata: {name: pretrain, namespace: strict}
spec:
  workers: {replicas: 2}
YAML
wait_until 60 "the TSTPretrainJob's 2 pods were not created" has_pods pretrain 2 $NS
kc get secret pretrain-tst-secret -n $NS >/dev/null || fail "no Secret pretrain-tst-secret"
[[ $(kc get networkpolicy pretrain-tst -n $NS \
  -o 'jsonpath={.spec.podSelector.matchLabels.tlt\.dev/kind}') == TSTPretrainJob ]] ||
  fail "no NetworkPolicy pretrain-tst selecting the TSTPretrainJob's pods"
for pod in pretrain-workers-0 pretrain-workers-1; do
  [[ $(kc get pod $pod -n $NS -o 'jsonpath={.spec.containers[?(@.name=="tlt")].volumeMounts[?(@.name=="tlt-job-secret")].mountPath}') == \
    /var/run/secrets/tlt.dev/job ]] || fail "$pod: the job's secret is not mounted in tlt"
  [[ $(kc get pod $pod -n $NS -o 'jsonpath={.spec.volumes[?(@.name=="tlt-job-secret")].secret.secretName}') == \
    pretrain-tst-secret ]] || fail "$pod: not the TSTPretrainJob's Secret"
done
k8s_say "pretrain (TSTPretrainJob): Secret pretrain-tst-secret in both workers' tlt, NetworkPolicy pretrain-tst"

# ---- 3. reconciles leave them be -------------------------------------------------------------------
K8S_STEP="reconciles after an edit and a pod's deletion"
rv() { kc get "$1" -n $NS -o 'jsonpath={.metadata.resourceVersion}'; }
secret_rv=$(rv secret/$JOB-rl-secret)
netpol_rv=$(rv networkpolicy/$JOB-rl)
data=$(kc get secret $JOB-rl-secret -n $NS -o 'jsonpath={.data.secret}')
kc annotate rljob $JOB -n $NS example.com/poke=1 >/dev/null
kc label rljob $JOB -n $NS team=ml >/dev/null
old_uid=$(kc get pod $JOB-rollout-0 -n $NS -o 'jsonpath={.metadata.uid}')
kc delete pod $JOB-rollout-0 -n $NS --wait=false >/dev/null
recreated() {
  local u
  u=$(kc get pod $JOB-rollout-0 -n $NS -o 'jsonpath={.metadata.uid}' 2>/dev/null) &&
    [[ -n $u && $u != "$old_uid" ]]
}
wait_until 60 "the deleted pod was not recreated" recreated
sleep 3  # the passes the edits and the pod's events caused
[[ $(kc get secret $JOB-rl-secret -n $NS -o 'jsonpath={.data.secret}') == "$data" ]] ||
  fail "the Secret's value changed under running pods"
[[ $(rv secret/$JOB-rl-secret) == "$secret_rv" ]] || fail "the Secret was rewritten"
[[ $(rv networkpolicy/$JOB-rl) == "$netpol_rv" ]] ||
  fail "the NetworkPolicy was rewritten though nothing changed (desired and stored differ?)"
k8s_say "after an edit and a recreated pod: Secret (value and resourceVersion) and NetworkPolicy unchanged"

# ---- 4. a squatted Secret name -----------------------------------------------------------------------
K8S_STEP="a Secret of the job's name that is not the job's"
kc create secret generic squat-rl-secret -n $NS --from-literal=secret=chosen-by-someone-else \
  >/dev/null
kc apply -f - >/dev/null <<'YAML'
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata: {name: squat, namespace: strict}
spec:
  roles: {rollout: {replicas: 1}, trainer: {replicas: 1}}
YAML
wait_until 60 "the job did not turn Failed" phase_is rljob/squat Failed $NS
reason=$(cond rljob/squat Failed reason $NS)
message=$(cond rljob/squat Failed message $NS)
[[ $reason == JobSecretNotOwned ]] || fail "Failed for reason \"$reason\", not JobSecretNotOwned"
[[ $message == *"Secret squat-rl-secret already exists and is not owned by this job"* ]] ||
  fail "the condition does not name the Secret: $message"
[[ $(count_pods squat $NS) -eq 0 ]] || fail "pods were created that would trust someone's Secret"
[[ $(kc get secret squat-rl-secret -n $NS -o 'jsonpath={.data.secret}' | base64 -d) == \
  chosen-by-someone-else ]] || fail "the squatter's Secret was changed"
[[ -z $(kc get secret squat-rl-secret -n $NS -o 'jsonpath={.metadata.ownerReferences}') ]] ||
  fail "the squatter's Secret was adopted"
k8s_say "squat: Failed, JobSecretNotOwned: $message"

# ---- 5. deletion ------------------------------------------------------------------------------------
K8S_STEP="deleting the job"
kc delete rljob $JOB -n $NS --wait=false >/dev/null
wait_until 60 "the job's Secret outlived the job" gone secret/$JOB-rl-secret
wait_until 60 "the job's NetworkPolicy outlived the job" gone networkpolicy/$JOB-rl
wait_until 60 "the job was not deleted (finalizer left?)" gone rljob/$JOB
k8s_say "deleted guarded: its Secret and NetworkPolicy are gone"

# ---- 6. the flags ------------------------------------------------------------------------------------
K8S_STEP="a bad --network-policy-metrics-from"
if out=$("$op" --kubeconfig "$KUBECONFIG" --metrics-port 1 \
  --network-policy-metrics-from=monitoring 2>&1); then
  fail "tlt-operator started with --network-policy-metrics-from=monitoring"
fi
[[ $out == *"--network-policy-metrics-from=monitoring: must be a namespace label KEY=VALUE"* ]] ||
  fail "$K8S_STEP: the error does not name the flag and the fix: $out"
K8S_STEP="the operator restarted with --job-network-policy=false"
kill -TERM "$OP_PID"
wait "$OP_PID" 2>/dev/null || true
k8s_free_port METRICS_PORT2
k8s_start_operator "$op" "$METRICS_PORT2" --watch-timeout 20 --job-network-policy=false
K8S_WATCH_PID=$OP_PID
wait_until 60 "pretrain's NetworkPolicy was not deleted" gone networkpolicy/pretrain-tst
kc get secret pretrain-tst-secret -n $NS >/dev/null || fail "the Secret went with the policy"
k8s_say "--job-network-policy=false: pretrain-tst deleted, its Secret kept; a bad metrics-from refused"
k8s_test_finish "the job's Secret and NetworkPolicy, owned and stable; the secret and" \
  "token in tlt only; a squatted name fails the job; deletion removes both"
