#!/usr/bin/env bash
# Bringing your own dataset to a cluster RLJob (issue 39), on a real etcd + kube-apiserver
# (scripts/k8s-env.sh) with kwok running a fake GPU node and the real tlt-operator under
# tests/operator/rbac.yaml and its default pod policy: an RLJob whose spec.task.dataset (a Parquet
# file and a held-out JSONL) lies on a PVC that the trainer's podTemplate mounts read-only at
# /data. The job runs; its trainer pod (which reads the dataset: rollout pods get prompts from
# it) carries the claim's volume and the mount beside the operator's own; the job.json it reads
# names the dataset's paths, both under that mount. A dataset path outside every mount is not
# the operator's to judge (the trainer's error names spec.task.dataset.path at its start).
# Stops every process it started (by PID) on exit, also on failure. Last line: PASS or FAIL.
# Usage: dataset_volume_apiserver.sh TLT_OPERATOR_BINARY SOURCE_DIR   (K8S_BIN=DIR, KEEP=1)
set -euo pipefail
op=$1
src=$(cd "$2" && pwd)
source "$src/scripts/k8s-env.sh"

k8s_test_begin dataset_volume_apiserver kwok
k8s_start_gpu_node
k8s_test_operator "$op" --watch-timeout 20

K8S_STEP="the claims"
for claim in models datasets; do
  kc apply -f - >/dev/null <<YAML
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: $claim, namespace: research}
spec:
  accessModes: [ReadOnlyMany]
  resources: {requests: {storage: 10Gi}}
YAML
done
JOB=rl-own-data
K8S_STEP="kubectl apply of the RLJob"
kc apply -f - >/dev/null <<YAML
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata: {name: $JOB, namespace: research}
spec:
  model: {path: /models/SmolLM2-135M-Instruct-hf, dtype: bfloat16, device: cuda}
  task:
    seed: 5
    dataset:
      path: /data/gsm/train.parquet
      promptField: prompt
      answerField: reward_model.ground_truth
      heldOutPath: /data/gsm/test.jsonl
  reward: {type: math}
  algorithm: {steps: 4, promptsPerStep: 8, groupSize: 4}
  roles:
    rollout:
      replicas: 1
      resources: {limits: {nvidia.com/gpu: "1"}}
      podTemplate:
        spec:
          containers:
            - name: tlt
              volumeMounts: [{name: models, mountPath: /models, readOnly: true}]
          volumes:
            - {name: models, persistentVolumeClaim: {claimName: models, readOnly: true}}
    trainer:
      replicas: 1
      resources: {limits: {nvidia.com/gpu: "1"}}
      podTemplate:
        spec:
          containers:
            - name: tlt
              volumeMounts:
                - {name: models, mountPath: /models, readOnly: true}
                - {name: datasets, mountPath: /data, readOnly: true}
          volumes:
            - {name: models, persistentVolumeClaim: {claimName: models, readOnly: true}}
            - {name: datasets, persistentVolumeClaim: {claimName: datasets, readOnly: true}}
YAML
wait_until 60 "the job's 2 pods were not created" has_pods $JOB 2
wait_until 60 "the job did not turn Running" phase_is rlj/$JOB Running
K8S_STEP="the trainer pod carries the dataset"
kc get configmap $JOB-rl-spec -n research -o 'jsonpath={.data.job\.json}' >"$K8S_TMP/job.json"
kc get pod $JOB-trainer-0 -n research -o json >"$K8S_TMP/trainer.json"
python3 - "$K8S_TMP/trainer.json" "$K8S_TMP/job.json" <<'PY' || fail "the trainer pod does not carry the dataset"
import json, sys
pod = json.load(open(sys.argv[1]))
dataset = json.load(open(sys.argv[2]))["spec"]["task"]["dataset"]
assert dataset["path"] == "/data/gsm/train.parquet", dataset
assert dataset["heldOutPath"] == "/data/gsm/test.jsonl", dataset
assert dataset["answerField"] == "reward_model.ground_truth", dataset
spec = pod["spec"]
volumes = {v["name"]: v for v in spec["volumes"]}
claim = volumes.get("datasets", {}).get("persistentVolumeClaim")
assert claim == {"claimName": "datasets", "readOnly": True}, "volume datasets: %s" % volumes.get("datasets")
tlt = [c for c in spec["containers"] if c["name"] == "tlt"][0]
mounts = {m["name"]: m for m in tlt["volumeMounts"]}
m = mounts.get("datasets")
assert m and m["mountPath"] == "/data" and m.get("readOnly") is True, "mount datasets: %s" % m
for p in (dataset["path"], dataset["heldOutPath"]):
    assert p.startswith(m["mountPath"] + "/"), "%s is not under %s" % (p, m["mountPath"])
assert "tlt-spec" in mounts, "the operator's own mounts: %s" % mounts
print("  %s: volume datasets <- claim datasets (ro), mounted at /data (ro); dataset %s, held out %s" % (
    pod["metadata"]["name"], dataset["path"], dataset["heldOutPath"]))
PY
k8s_say "the dataset arrives on the trainer pod's PVC"
k8s_test_finish "the dataset's PVC, mount and paths in the trainer pod"
