#!/usr/bin/env bash
# A real Kueue (scripts/k8s-kueue.sh; built by `scripts/k8s-tools.sh kueue`) on a real etcd +
# kube-apiserver with kwok GPU nodes and kube-scheduler, driven by hand-made Workloads:
#   1. Kueue starts with tlt's externalFrameworks and waitForPodsReady; ClusterQueue `team`
#      (8 nvidia.com/gpu in flavour gpu) and LocalQueue research/team report Active;
#   2. Workload `first` (pod sets trainer 1 x 4 GPUs, rollout 1 x 2 GPUs, drafter 0 x 1 GPU) is
#      admitted: QuotaReserved and Admitted True, status.admission names ClusterQueue team and
#      flavour gpu for every pod set's nvidia.com/gpu;
#   3. a pod built from the trainer pod set with the flavour's node labels as node selector is
#      bound by kube-scheduler to a kwok node and Running;
#   4. Workload `second` (trainer 1 x 4 GPUs: 6 + 4 > 8) stays pending: QuotaReserved False,
#      reason Pending, no admission; it reads back through v1beta1 (Kueue's conversion webhook);
#   5. deleting `first` admits `second`.
# Stops every process it started (by PID) on exit, also on failure. Last line: PASS or FAIL.
# Usage: kueue_apiserver.sh SOURCE_DIR   (K8S_BIN=DIR, KEEP=1)
set -euo pipefail
src=$(cd "$1" && pwd)
source "$src/scripts/k8s-env.sh"
source "$src/scripts/k8s-kueue.sh"

k8s_test_begin kueue_apiserver kueue kwok kube-scheduler kube-controller-manager
K8S_FAIL_LOGS="kueue kwok kube-scheduler"

# ---- 1. Kueue, nodes, queues ---------------------------------------------------------------------
# waitForPodsReady on (as the job tests use it), with a timeout longer than this test: Kueue
# accepts the configuration; no Workload here has pods that must become ready in time.
k8s_kueue_start --wait-for-pods-ready 5m --requeue-backoff 1 || fail "$K8S_STEP"
K8S_WATCH_PID=$KUEUE_PID
k8s_kueue_nodes 1 8 || fail "$K8S_STEP"
K8S_STEP="create namespace research"
kc create namespace research >/dev/null
kc create serviceaccount default -n research >/dev/null
k8s_kueue_queue research team 8 || fail "$K8S_STEP"

# workload NAME TRAINER_GPUS ROLLOUT_GPUS: a Workload in research/team; pod sets trainer (1 pod,
# TRAINER_GPUS), and when ROLLOUT_GPUS > 0 rollout (1 pod, ROLLOUT_GPUS) and drafter (0 pods).
podset() {  # NAME COUNT GPUS
  cat <<YAML
  - name: $1
    count: $2
    template:
      spec:
        restartPolicy: Never
        containers:
        - name: tlt
          image: registry.invalid/tlt:test
          resources:
            requests: {cpu: "1", memory: 1Gi, nvidia.com/gpu: "$3"}
            limits: {nvidia.com/gpu: "$3"}
YAML
}
workload() {
  {
    printf 'apiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\n'
    printf 'metadata: {name: %s, namespace: research}\nspec:\n  queueName: team\n  podSets:\n' "$1"
    podset trainer 1 "$2"
    if (($3 > 0)); then podset rollout 1 "$3"; podset drafter 0 1; fi
  } | kc create -f - >/dev/null
}
wl() {  # NAME JSONPATH
  kc get workload "$1" -n research -o "jsonpath=$2"
}
wl_cond() {  # NAME TYPE FIELD
  wl "$1" "{.status.conditions[?(@.type==\"$2\")].$3}"
}
admitted() {
  [[ $(wl_cond "$1" QuotaReserved status) == True && $(wl_cond "$1" Admitted status) == True ]]
}

# ---- 2. the first Workload fits and is admitted --------------------------------------------------
K8S_STEP="create Workload first (6 GPUs, a drafter pod set of count 0)"
workload first 4 2
wait_until 30 "Workload first was not admitted (QuotaReserved and Admitted True)" admitted first
K8S_STEP="check first's admission"
cq=$(wl first '{.status.admission.clusterQueue}')
[[ $cq == team ]] || fail "first's status.admission.clusterQueue is '$cq', not team"
for ps in trainer rollout drafter; do
  flavour=$(wl first \
    "{.status.admission.podSetAssignments[?(@.name==\"$ps\")].flavors.nvidia\\.com/gpu}")
  [[ $flavour == "$KUEUE_FLAVOR" ]] ||
    fail "first's pod set $ps got nvidia.com/gpu flavour '$flavour', not $KUEUE_FLAVOR"
done
cq_gpus() {  # the nvidia.com/gpu that ClusterQueue team reports reserved
  kc get clusterqueue team -o \
    'jsonpath={range .status.flavorsReservation[*].resources[*]}{.name}={.total}{"\n"}{end}' |
    sed -n 's|^nvidia\.com/gpu=||p'
}
cq_gpus_are() { [[ $(cq_gpus) == "$1" ]]; }
wait_until 30 "ClusterQueue team did not report 6 nvidia.com/gpu reserved" cq_gpus_are 6

# ---- 3. a pod with the admission's node selector lands on a kwok GPU node ------------------------
K8S_STEP="a trainer pod with the flavour's node labels"
selector=$(kc get resourceflavor "$KUEUE_FLAVOR" -o 'jsonpath={.spec.nodeLabels}')
kc create -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: first-trainer-0, namespace: research, labels: {kueue.x-k8s.io/podset: trainer}}
spec:
  nodeSelector: $selector
  containers:
  - name: tlt
    image: registry.invalid/tlt:test
    resources:
      requests: {cpu: "1", memory: 1Gi, nvidia.com/gpu: "4"}
      limits: {nvidia.com/gpu: "4"}
YAML
pod_running() {
  [[ $(kc get pod first-trainer-0 -n research -o 'jsonpath={.spec.nodeName}/{.status.phase}') == \
    bench-node-0/Running ]]
}
wait_until 30 "pod first-trainer-0 was not bound to bench-node-0 and Running" pod_running

# ---- 4. the second Workload does not fit and stays pending ---------------------------------------
K8S_STEP="create Workload second (4 GPUs; 2 left)"
workload second 4 0
pending() { [[ $(wl_cond second QuotaReserved reason) == Pending ]]; }
wait_until 30 "Workload second was not marked QuotaReserved=False reason Pending" pending
sleep 3  # Kueue's scheduler had its chances: it still must not admit second
K8S_STEP="check second stays pending"
[[ $(wl_cond second QuotaReserved status) == False ]] || fail "second reserved quota beyond 8 GPUs"
admission=$(wl second '{.status.admission}')
[[ -z $admission ]] || fail "second has an admission: $admission"
msg=$(wl_cond second QuotaReserved message)
k8s_say "second pending: $msg"
K8S_STEP="read second through v1beta1 (Kueue's conversion webhook)"
queue=$(kc get workloads.v1beta1.kueue.x-k8s.io second -n research \
  -o 'jsonpath={.spec.queueName}' 2>/dev/null)  # (a deprecation warning on stderr)
[[ $queue == team ]] || fail "second read as v1beta1 has spec.queueName '$queue', not team"

# ---- 5. deleting the first admits the second -----------------------------------------------------
K8S_STEP="delete Workload first and its pod"
kc delete pod first-trainer-0 -n research --wait=false >/dev/null
kc delete workload first -n research --wait=false >/dev/null
wait_until 30 "Workload second was not admitted after first was deleted" admitted second

k8s_test_finish "Kueue $(cat "$K8S_BIN/.kueue.version") admitted a 6-GPU Workload, queued a" \
  "4-GPU one on 8 GPUs, admitted it once the first was deleted; a pod with the flavour's node" \
  "labels bound by kube-scheduler to a kwok GPU node"
