#!/usr/bin/env bash
# Bringing your own model to a cluster job (issue 19), on a real etcd + kube-apiserver
# (scripts/k8s-env.sh) with kwok running a fake GPU node and the real tlt-operator under
# tests/operator/rbac.yaml and its default pod policy:
#   1. kubectl apply of examples/tst-hf-model-cluster.yaml (spec.model.path on a PVC mounted
#      through podTemplate): the job runs, and every worker pod carries the PVC volume (claim
#      "models", read-only), the tlt container mounts it at /models read-only next to the
#      operator's own mounts, keeps the podTemplate's TLT_CACHE, and the job.json it reads
#      (ConfigMap, TLT_JOB_FILE) names spec.model.path, which lies under that mount;
#   2. the same job bringing the model through a hostPath volume instead is refused by the pod
#      policy (Failed, ForbiddenByPodPolicy, the field named) and gets no pod.
# Stops every process it started (by PID) on exit, also on failure. Last line: PASS or FAIL.
# Usage: model_volume_apiserver.sh TLT_OPERATOR_BINARY SOURCE_DIR   (K8S_BIN=DIR, KEEP=1)
set -euo pipefail
op=$1
src=$(cd "$2" && pwd)
source "$src/scripts/k8s-env.sh"

k8s_test_begin model_volume_apiserver kwok
k8s_start_gpu_node
k8s_test_operator "$op" --watch-timeout 20

# ---- 1. the model on a PVC ---------------------------------------------------------------------
K8S_STEP="the claims"
for claim in models corpus checkpoints; do
  kc apply -f - >/dev/null <<YAML
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: $claim, namespace: research}
spec:
  accessModes: [ReadOnlyMany]
  resources: {requests: {storage: 10Gi}}
YAML
done
JOB=tst-smollm2
K8S_STEP="kubectl apply of examples/tst-hf-model-cluster.yaml"
kc apply -f "$src/examples/tst-hf-model-cluster.yaml" >/dev/null
wait_until 60 "the job's 2 worker pods were not created" has_pods $JOB 2
wait_until 60 "the job did not turn Running" phase_is tstj/$JOB Running
K8S_STEP="the pods carry the model"
model_path=$(kc get tstj $JOB -n research -o 'jsonpath={.spec.model.path}')
[[ $model_path == /models/SmolLM2-135M-Instruct-hf ]] || fail "spec.model.path is \"$model_path\""
kc get configmap $JOB-tst-spec -n research -o 'jsonpath={.data.job\.json}' >"$K8S_TMP/job.json"
python3 - "$model_path" "$K8S_TMP/job.json" <<'PY' || fail "job.json does not carry spec.model.path"
import json, sys
model = json.load(open(sys.argv[2]))["spec"]["model"]
assert model["path"] == sys.argv[1] and model["format"] == "hf", model
PY
for i in 0 1; do
  pod=$JOB-workers-$i
  kc get pod $pod -n research -o json >"$K8S_TMP/$pod.json"
  python3 - "$K8S_TMP/$pod.json" "$model_path" <<'PY' || fail "pod $pod does not carry the model"
import json, sys
pod = json.load(open(sys.argv[1]))
model_path = sys.argv[2]
spec = pod["spec"]
volumes = {v["name"]: v for v in spec["volumes"]}
claim = volumes.get("models", {}).get("persistentVolumeClaim")
assert claim == {"claimName": "models", "readOnly": True}, "volume models: %s" % volumes.get("models")
tlt = [c for c in spec["containers"] if c["name"] == "tlt"][0]
mounts = {m["name"]: m for m in tlt["volumeMounts"]}
m = mounts.get("models")
assert m and m["mountPath"] == "/models" and m.get("readOnly") is True, "mount models: %s" % m
assert model_path.startswith(m["mountPath"] + "/"), "%s is not under %s" % (model_path, m["mountPath"])
assert "tlt-spec" in mounts and "tlt-tmp" in mounts, "the operator's own mounts: %s" % mounts
env = {e["name"]: e.get("value") for e in tlt["env"]}
assert env.get("TLT_CACHE") == "/tmp/tlt-cache", env
assert env.get("TLT_JOB_FILE", "").endswith("/job.json"), env
job_mount = [x for x in tlt["volumeMounts"] if env["TLT_JOB_FILE"].startswith(x["mountPath"] + "/")]
assert job_mount, "no mount holds TLT_JOB_FILE %s" % env["TLT_JOB_FILE"]
print("  %s: volume models <- claim models (ro), mounted at /models (ro); spec.model.path %s; job file %s" % (
    pod["metadata"]["name"], model_path, env["TLT_JOB_FILE"]))
PY
done

# ---- 2. the same model through hostPath: refused by the default pod policy ------------------------
K8S_STEP="the hostPath variant"
sed -e 's/name: tst-smollm2/name: tst-hostpath/' \
  -e 's|persistentVolumeClaim: {claimName: models, readOnly: true}|hostPath: {path: /srv/models}|' \
  "$src/examples/tst-hf-model-cluster.yaml" >"$K8S_TMP/hostpath.yaml"
grep -q 'hostPath: {path: /srv/models}' "$K8S_TMP/hostpath.yaml" || fail "the sed edit of the example did not apply"
kc apply -f "$K8S_TMP/hostpath.yaml" >/dev/null
wait_until 60 "the hostPath job did not turn Failed" phase_is tstj/tst-hostpath Failed
reason=$(kc get tstj tst-hostpath -n research -o 'jsonpath={.status.conditions[?(@.type=="Failed")].reason}')
message=$(kc get tstj tst-hostpath -n research -o 'jsonpath={.status.conditions[?(@.type=="Failed")].message}')
[[ $reason == ForbiddenByPodPolicy ]] || fail "hostPath job: reason \"$reason\""
[[ $message == *"spec.workers.podTemplate.spec.volumes[0].hostPath"* ]] || fail "hostPath job: message \"$message\""
[[ $(count_pods tst-hostpath) -eq 0 ]] || fail "the hostPath job got pods"
k8s_say "hostPath refused: $message"
k8s_test_finish "the model's PVC, mount and path in every worker pod; hostPath refused"
