#!/usr/bin/env bash
# tlt-operator --kueue with a real Kueue (scripts/k8s-kueue.sh) on a real etcd + kube-apiserver,
# kwok GPU nodes and kube-scheduler: the job side of Kueue's contract (docs/kueue.md).
#   1. two RLJobs of 6 GPUs each in LocalQueue research/team (8 GPUs): `first` gets a Workload
#      owned by it, is admitted, its pods carry the flavour's node selector and run (Running,
#      Admitted True); `second` stays Queued with no pods, QuotaReserved False;
#   2. an RLJob without the label runs at once, with no Workload;
#   3. an RLJob naming LocalQueue `nope` is Queued with Kueue's "LocalQueue nope doesn't exist";
#   4. deleting `first` deletes its Workload; `second` is admitted and runs;
#   5. a TSTPretrainJob of WorkloadPriorityClass `urgent` (4 GPUs) preempts `second`: its pods
#      are deleted, it is Queued with Evicted True (reason Preempted), the TSTPretrainJob runs;
#      the admission of `second`'s Workload is cleared by the operator (Kueue then requeues it);
#      deleting the TSTPretrainJob lets `second` run again;
#   6. all or nothing (Kueue's waitForPodsReady, 20 s here): RLJob `stuck` (2 GPUs) is admitted
#      but its rollout pod cannot be scheduled: its condition PodsPending names the pod and the
#      scheduler's reason (--pods-pending-timeout 5), then Kueue evicts it (PodsReadyTimeout) and
#      the operator deletes its pods, the running trainer's too: Queued, Evicted True.
# Resuming at the step reached needs the runtime (kwok runs no containers): tlt run-role's resume
# from <spec.checkpoint.path>/tlt is covered by the runtime's tests.
# Stops every process it started (by PID) on exit, also on failure. Last line: PASS or FAIL.
# Usage: kueue_jobs_apiserver.sh TLT_OPERATOR_BINARY SOURCE_DIR   (K8S_BIN=DIR, KEEP=1)
set -euo pipefail
op=$1
src=$(cd "$2" && pwd)
source "$src/scripts/k8s-env.sh"
source "$src/scripts/k8s-kueue.sh"

k8s_test_begin kueue_jobs_apiserver kueue kwok kube-scheduler kube-controller-manager
K8S_FAIL_LOGS="operator kueue kwok kube-scheduler"

# ---- Kueue, nodes, the operator, queues ---------------------------------------------------------
k8s_kueue_start --wait-for-pods-ready 20s --requeue-backoff 1 || fail "$K8S_STEP"
k8s_kueue_nodes 1 8 || fail "$K8S_STEP"
k8s_install_operator
k8s_kueue_queue research team 8 || fail "$K8S_STEP"
k8s_test_operator "$op" --kueue --watch-timeout 20 --pods-pending-timeout 5
K8S_STEP="WorkloadPriorityClass urgent"
kc apply -f - >/dev/null <<'YAML'
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: urgent}
value: 1000
YAML

# rljob NAME QUEUE [TRAINER_GPUS ROLLOUT_GPUS [ROLLOUT_NODE_SELECTOR]]: an RLJob with a trainer
# of 4 GPUs and a rollout pod of 2 (QUEUE "" : no label).
rljob() {
  local labels="" tg=${3:-4} rg=${4:-2} sel=${5:-"{}"}
  [[ -z $2 ]] || labels="labels: {kueue.x-k8s.io/queue-name: $2}"
  kc apply -f - >/dev/null <<YAML
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata:
  name: $1
  namespace: research
  $labels
spec:
  model: {preset: micro}
  task: {name: arithmetic-cot}
  checkpoint: {path: /ckpt/$1}
  roles:
    rollout:
      replicas: 1
      resources:
        requests: {cpu: "1", memory: 1Gi, nvidia.com/gpu: "$rg"}
        limits: {nvidia.com/gpu: "$rg"}
      podTemplate: {spec: {nodeSelector: $sel}}
    trainer:
      replicas: 1
      resources:
        requests: {cpu: "1", memory: 1Gi, nvidia.com/gpu: "$tg"}
        limits: {nvidia.com/gpu: "$tg"}
YAML
}
cond() {  # RESOURCE/NAME TYPE FIELD
  kc get "$1" -n research -o "jsonpath={.status.conditions[?(@.type==\"$2\")].$3}"
}
running_pods() {  # JOB N: N pods of JOB, all Running on a kwok node
  [[ $(kc get pods -n research -l "tlt.dev/job=$1" \
    -o 'jsonpath={range .items[*]}{.status.phase}{"\n"}{end}' | grep -c '^Running$') -eq $2 ]]
}
no_pods() { has_pods "$1" 0; }
exists() { kc get "$1" -n research >/dev/null 2>&1; }
gone() { ! exists "$1"; }

# ---- 1. first admitted and running, second queued ---------------------------------------------
K8S_STEP="RLJob first (6 GPUs) in LocalQueue team"
rljob first team
wait_until 60 "RLJob first's pods did not run" running_pods first 2
[[ $(kc get workload rljob-first -n research -o 'jsonpath={.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].controller}') == RLJob/true ]] ||
  fail "Workload rljob-first is not controlled by the RLJob"
[[ $(kc get workload rljob-first -n research -o 'jsonpath={.spec.podSets[*].name}') == "rollout trainer drafter" ]] ||
  fail "Workload rljob-first's pod sets: $(kc get workload rljob-first -n research -o 'jsonpath={.spec.podSets[*].name}')"
sel=$(kc get pod first-trainer-0 -n research -o 'jsonpath={.spec.nodeSelector.nvidia\.com/gpu\.product}')
[[ $sel == "$KUEUE_GPU_PRODUCT" ]] || fail "first-trainer-0's nodeSelector lacks the flavour's label (got '$sel')"
wait_until 30 "RLJob first is not Running" phase_is rljob/first Running
[[ $(cond rljob/first Admitted status) == True ]] || fail "RLJob first's Admitted is not True"
K8S_STEP="RLJob second (6 more GPUs of 8)"
rljob second team
wait_until 30 "RLJob second is not Queued" phase_is rljob/second Queued
wait_until 30 "RLJob second's QuotaReserved is not False/Pending" \
  eval '[[ $(cond rljob/second QuotaReserved reason) == Pending ]]'
sleep 3
no_pods second || fail "RLJob second has pods while queued"
kc get rljobs -n research
k8s_say "first runs (Admitted), second Queued: $(cond rljob/second Running message)"

# ---- 2. no label: runs as without Kueue; 3. a LocalQueue that does not exist --------------------
K8S_STEP="RLJob plain (no queue label)"
rljob plain ""
wait_until 60 "RLJob plain (no label) did not get its pods" has_pods plain 2
gone workload/rljob-plain || fail "RLJob plain got a Workload"
kc delete rljob plain -n research --wait=false >/dev/null
K8S_STEP="RLJob lost (LocalQueue nope)"
rljob lost nope
lost_says() { [[ $(cond rljob/lost QuotaReserved message) == *"LocalQueue nope doesn't exist"* ]]; }
wait_until 30 "RLJob lost's QuotaReserved does not say LocalQueue nope doesn't exist" lost_says
[[ $(kc get rljob lost -n research -o 'jsonpath={.status.phase}') == Queued ]] || fail "RLJob lost is not Queued"
[[ $(cond rljob/lost Running message) == *"LocalQueue nope doesn't exist"* ]] ||
  fail "RLJob lost's Running condition does not say why: $(cond rljob/lost Running message)"
no_pods lost || fail "RLJob lost has pods"
kc delete rljob lost -n research --wait=false >/dev/null

# ---- 4. first deleted: second admitted -----------------------------------------------------------
K8S_STEP="delete RLJob first"
kc delete rljob first -n research --wait=false >/dev/null
wait_until 30 "Workload rljob-first was not deleted with the job" gone workload/rljob-first
wait_until 60 "RLJob second did not run once first was deleted" running_pods second 2
wait_until 30 "RLJob second is not Running" phase_is rljob/second Running

# ---- 5. a higher-priority TSTPretrainJob preempts second -------------------------------------------
K8S_STEP="TSTPretrainJob urgent (4 GPUs, WorkloadPriorityClass urgent)"
kc apply -f - >/dev/null <<'YAML'
apiVersion: tlt.dev/v1alpha1
kind: TSTPretrainJob
metadata:
  name: urgent
  namespace: research
  labels: {kueue.x-k8s.io/queue-name: team, kueue.x-k8s.io/priority-class: urgent}
spec:
  workers:
    replicas: 1
    resources:
      requests: {cpu: "1", memory: 1Gi, nvidia.com/gpu: "4"}
      limits: {nvidia.com/gpu: "4"}
YAML
[[ $(kc get workload tstpretrainjob-urgent -n research -o 'jsonpath={.spec.priority}' 2>/dev/null || true) == 1000 ]] ||
  wait_until 30 "Workload tstpretrainjob-urgent has no priority 1000" \
    eval '[[ $(kc get workload tstpretrainjob-urgent -n research -o "jsonpath={.spec.priority}") == 1000 ]]'
evicted() { [[ $(cond rljob/second Evicted status) == True ]]; }
wait_until 60 "RLJob second was not evicted (Evicted True)" evicted
[[ $(cond rljob/second Evicted reason) == Preempted ]] ||
  fail "RLJob second's Evicted reason is $(cond rljob/second Evicted reason), not Preempted"
wait_until 60 "RLJob second's pods were not deleted" no_pods second
wait_until 30 "RLJob second is not Queued after its eviction" phase_is rljob/second Queued
wait_until 60 "TSTPretrainJob urgent did not run" running_pods urgent 1
[[ -z $(kc get workload rljob-second -n research -o 'jsonpath={.status.admission}') ]] ||
  wait_until 30 "Workload rljob-second's admission was not cleared" \
    eval '[[ -z $(kc get workload rljob-second -n research -o "jsonpath={.status.admission}") ]]'
kc get rljobs,tstpretrainjobs -n research
K8S_STEP="delete TSTPretrainJob urgent"
kc delete tstpretrainjob urgent -n research --wait=false >/dev/null
wait_until 60 "RLJob second did not run again after urgent was deleted" running_pods second 2

# ---- 6. all or nothing: a pod that cannot start, PodsPending, then Kueue's PodsReadyTimeout -------
K8S_STEP="RLJob stuck (2 GPUs; its rollout pod selects no node)"
rljob stuck team 1 1 '{tlt.test/nowhere: "true"}'
pending_named() {
  [[ $(cond rljob/stuck PodsPending status) == True &&
    $(cond rljob/stuck PodsPending message) == *"stuck-rollout-0 (Unschedulable"* ]]
}
wait_until 60 "RLJob stuck's PodsPending does not name stuck-rollout-0 as Unschedulable" pending_named
k8s_say "stuck: $(cond rljob/stuck PodsPending message)"
timed_out() { [[ $(cond rljob/stuck Evicted reason) == PodsReadyTimeout ]]; }
wait_until 90 "Kueue did not evict RLJob stuck for PodsReadyTimeout" timed_out
stuck_evicted() {
  kc get events -n research --field-selector involvedObject.name=stuck,reason=Evicted \
    -o 'jsonpath={.items[*].message}' | grep -q "stuck-trainer-0"
}
wait_until 30 "the operator did not delete stuck's pods, its running trainer too" stuck_evicted

k8s_test_finish "Kueue $(cat "$K8S_BIN/.kueue.version"): one of two 6-GPU RLJobs admitted on 8 GPUs, the other Queued until the first was deleted; no label runs at once; a missing LocalQueue said so; a priority-1000 TSTPretrainJob preempted an RLJob, which ran again after it; a job whose pod could not be scheduled was named in PodsPending, then evicted whole by waitForPodsReady"
