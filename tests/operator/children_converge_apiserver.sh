#!/usr/bin/env bash
# Every child of a job converges and goes with its job (issue 41), on a real etcd +
# kube-apiserver (scripts/k8s-env.sh) with kwok running a fake GPU node and the real tlt-operator
# under tests/operator/rbac.yaml. No garbage collector runs: what is deleted, the operator
# deletes. Each step states the time within which the job converges:
#   a. policy revoked: RLJob `hostnet` (trainer hostNetwork) runs under an operator started with
#      --pod-security=privileged; restarted at the default (restricted), the job is Failed
#      (ForbiddenByPodPolicy) and its pods are gone within 30 s;
#   b. lost labels: `kubectl label pod lab-trainer-0 tlt.dev/job-` -> the same pod (same uid) is
#      labelled again within 10 s, one Relabeled Event, still one PodsCreated Event; the same
#      while the operator is down (found by its name after the restart, within 20 s); a pod
#      unlabelled just before scale-down, suspend, or deletion of the job is deleted with the
#      others within 20 s;
#   c. edited Service: ports and selector of lab-rl changed -> restored within 10 s;
#   d. job deletion: nothing the job made is left (pods, Service, ConfigMap, ServiceAccount, Role,
#      RoleBinding, by name, whatever their labels) within 20 s.
# Stops every process it started (by PID) on exit, also on failure. Last line: PASS or FAIL.
# Usage: children_converge_apiserver.sh TLT_OPERATOR_BINARY SOURCE_DIR   (K8S_BIN=DIR, KEEP=1)
set -euo pipefail
op=$1
src=$(cd "$2" && pwd)
source "$src/scripts/k8s-env.sh"

k8s_test_begin children_converge_apiserver kwok
k8s_start_gpu_node

start_op() { k8s_test_operator "$op" --watch-timeout 20 "$@"; }  # FLAGS...: (re)starts it, OP_PID
stop_op() {
  K8S_WATCH_PID=
  kill "$OP_PID" 2>/dev/null || true
  wait "$OP_PID" 2>/dev/null || true
}
# Pods of JOB by name (labels may be missing), not being deleted, sorted.
pods_named() {
  kc get pods -n research \
    -o 'jsonpath={range .items[*]}{.metadata.name} {.metadata.deletionTimestamp}{"\n"}{end}' |
    awk -v p="$1-" 'NF == 1 && index($1, p) == 1 { print $1 }' | sort | paste -sd' '
}
pods_named_are() { [[ $(pods_named "$1") == "$2" ]]; }
count_events() { events "$1" "$2" | grep -c . || true; }
label_of() { kc get pod "$1" -n research -o "jsonpath={.metadata.labels.tlt\.dev/job}"; }
label_is() { [[ $(label_of "$1") == "$2" ]]; }
# Anything named after JOB left in research: pods, services, configmaps, identity.
leftovers() {
  kc get pods,services,configmaps,serviceaccounts,roles,rolebindings -n research -o name |
    grep -E "/$1-" || true
}
nothing_left() { [[ -z $(leftovers "$1") ]]; }
timed() {  # BOUND WHAT CMD...: wait_until, then say how long it took
  local t=$SECONDS
  wait_until "$@"
  k8s_say "$2: converged in $((SECONDS - t)) s (bound $1 s)"
}

# ---- a. a revoked policy: the job Failed and its pods deleted ----------------------------------
K8S_STEP="operator with --pod-security=privileged"
start_op --pod-security=privileged
K8S_STEP="a: RLJob hostnet"
kc apply -f - >/dev/null <<'YAML'
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata: {name: hostnet, namespace: research}
spec:
  roles:
    rollout: {replicas: 1}
    trainer:
      replicas: 1
      podTemplate:
        spec: {hostNetwork: true}
YAML
wait_until 60 "hostnet did not get its 2 pods" pods_named_are hostnet "hostnet-rollout-0 hostnet-trainer-0"
stop_op
K8S_STEP="a: operator restarted at --pod-security=restricted (the default)"
start_op
revoked() {
  phase_is rljob/hostnet Failed && [[ $(cond rljob/hostnet Failed reason) == ForbiddenByPodPolicy ]] &&
    pods_named_are hostnet ""
}
timed 30 "a: hostnet Failed (ForbiddenByPodPolicy) with no pod left" revoked

# ---- b. a pod that lost its tlt.dev/job label ----------------------------------------------------
K8S_STEP="b: RLJob lab"
kc apply -f - >/dev/null <<'YAML'
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata: {name: lab, namespace: research}
spec:
  roles:
    rollout: {replicas: 3}
    trainer: {replicas: 1}
YAML
wait_until 60 "lab did not get its 4 pods" pods_named_are lab \
  "lab-rollout-0 lab-rollout-1 lab-rollout-2 lab-trainer-0"
wait_until 30 "lab: no PodsCreated Event" has_event lab PodsCreated
uid=$(kc get pod lab-trainer-0 -n research -o 'jsonpath={.metadata.uid}')
kc label pod lab-trainer-0 -n research tlt.dev/job- >/dev/null
timed 10 "b: lab-trainer-0 labelled again" label_is lab-trainer-0 lab
[[ $(kc get pod lab-trainer-0 -n research -o 'jsonpath={.metadata.uid}') == "$uid" ]] ||
  fail "b: lab-trainer-0 was replaced, not re-labelled"
wait_until 10 "b: no Relabeled Event" has_event lab Relabeled
sleep 3  # (a repeated create would show as a second PodsCreated Event by now)
[[ $(count_events lab PodsCreated) -eq 1 ]] ||
  fail "b: PodsCreated Events repeat: $(events lab PodsCreated)"
[[ $(pods_named lab) == "lab-rollout-0 lab-rollout-1 lab-rollout-2 lab-trainer-0" ]] ||
  fail "b: pods of lab: $(pods_named lab)"

K8S_STEP="b: label removed while the operator is down"
stop_op
kc label pod lab-rollout-0 -n research tlt.dev/job- app.kubernetes.io/managed-by- >/dev/null
start_op
timed 20 "b: lab-rollout-0 labelled again after a restart" label_is lab-rollout-0 lab

K8S_STEP="b: scale-down reaches an unlabelled pod"
kc label pod lab-rollout-2 -n research tlt.dev/job- >/dev/null
kc patch rljob lab -n research --type merge -p '{"spec":{"roles":{"rollout":{"replicas":2}}}}' >/dev/null
timed 20 "b: scaled down to 2 rollouts, lab-rollout-2 gone" pods_named_are lab \
  "lab-rollout-0 lab-rollout-1 lab-trainer-0"

K8S_STEP="b: suspend reaches an unlabelled pod"
kc label pod lab-trainer-0 -n research tlt.dev/job- >/dev/null
kc patch rljob lab -n research --type merge -p '{"spec":{"suspend":true}}' >/dev/null
timed 20 "b: suspended, no pod left" pods_named_are lab ""
kc patch rljob lab -n research --type merge -p '{"spec":{"suspend":false}}' >/dev/null
wait_until 60 "lab did not get its pods back on resume" pods_named_are lab \
  "lab-rollout-0 lab-rollout-1 lab-trainer-0"

# ---- c. an edited Service ------------------------------------------------------------------------
K8S_STEP="c: Service lab-rl edited"
want_svc=$(kc get service lab-rl -n research -o 'jsonpath={.spec.ports[*].port} {.spec.selector}')
kc patch service lab-rl -n research --type merge \
  -p '{"spec":{"ports":[{"name":"web","port":80}],"selector":{"app":"someone-else"}}}' >/dev/null
svc_is() { [[ $(kc get service lab-rl -n research -o 'jsonpath={.spec.ports[*].port} {.spec.selector}') == "$want_svc" ]]; }
timed 10 "c: lab-rl restored ($want_svc)" svc_is

# ---- d. deletion leaves nothing, an unlabelled pod included --------------------------------------
K8S_STEP="d: deletion with an unlabelled pod"
kc label pod lab-rollout-1 -n research tlt.dev/job- app.kubernetes.io/managed-by- >/dev/null
kc delete rljob lab -n research --wait=false >/dev/null
timed 20 "d: lab deleted, nothing of it left" nothing_left lab
kc delete rljob hostnet -n research --wait=false >/dev/null
timed 20 "d: hostnet deleted, nothing of it left" nothing_left hostnet
K8S_STEP="the operator process"
kill -0 "$OP_PID" 2>/dev/null || fail "the operator exited"
k8s_test_finish "revoked policy deletes pods, lost labels restored, edited Service restored," \
  "deletion leaves nothing"
