#!/usr/bin/env bash
# One job's podTemplate of wrong JSON types stops nothing (issue 41), on a real etcd +
# kube-apiserver (scripts/k8s-env.sh) with the real tlt-operator under tests/operator/rbac.yaml.
# The CRDs keep podTemplate as x-kubernetes-preserve-unknown-fields, so the apiserver stores
# these as written:
#   1. user `tenant` (may create RLJobs, not pods) creates RLJob `broken`, whose rollout
#      podTemplate has `volumes: [{name: false}]`, and RLJob `broken2`, whose tlt container has
#      `env: [{name: A, value: 1}]` and `name: 1` sidecar. Each turns Failed (InvalidSpec), the
#      condition and a Warning Event naming the field, e.g.
#      "spec.roles.rollout.podTemplate.spec.volumes[0].name: must be a string (got false)", and
#      gets no pod, Service or ConfigMap;
#   2. RLJob `good`, created after them, gets its pods (Pending: no node);
#   3. the operator is the same process throughout (never restarted, never aborted).
# Stops every process it started (by PID) on exit, also on failure. Last line: PASS or FAIL.
# Usage: template_types_apiserver.sh TLT_OPERATOR_BINARY SOURCE_DIR   (K8S_BIN=DIR, KEEP=1)
set -euo pipefail
op=$1
src=$(cd "$2" && pwd)
source "$src/scripts/k8s-env.sh"

k8s_test_begin template_types_apiserver
k8s_test_operator "$op" --watch-timeout 20

alive() { kill -0 "$OP_PID" 2>/dev/null || fail "the operator exited: $(tail -5 "$K8S_TMP/operator.log")"; }

# ---- 1. wrong-typed podTemplates, by a tenant ---------------------------------------------------
K8S_STEP="RBAC of the tenant"
kc create role job-author -n research --verb=create,get,list,watch,delete \
  --resource=rljobs.tlt.dev >/dev/null
kc create rolebinding job-author -n research --role=job-author --user=tenant >/dev/null
K8S_STEP="RLJobs with wrong-typed podTemplates"
kc --as tenant apply -f - >/dev/null <<'YAML'
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata: {name: broken, namespace: research}
spec:
  roles:
    rollout:
      replicas: 1
      podTemplate:
        spec:
          volumes: [{name: false, emptyDir: {}}]
    trainer: {replicas: 1}
---
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata: {name: broken2, namespace: research}
spec:
  roles:
    rollout:
      replicas: 1
      podTemplate:
        spec:
          containers:
            - {name: tlt, env: [{name: A, value: 1}]}
            - {name: 1, image: side:1}
    trainer: {replicas: 1}
YAML
stored=$(kc get rljob broken -n research -o 'jsonpath={.spec.roles.rollout.podTemplate.spec.volumes[0].name}')
[[ $stored == false ]] || fail "the apiserver did not store name: false as written (got '$stored')"
declare -A WANT=(
  [broken]="spec.roles.rollout.podTemplate.spec.volumes[0].name: must be a string (got false)"
  [broken2]="spec.roles.rollout.podTemplate.spec.containers[0].env[0].value: must be a string (got 1)"
)
WANT2="spec.roles.rollout.podTemplate.spec.containers[1].name: must be a string (got 1)"
for job in broken broken2; do
  K8S_STEP="RLJob $job"
  wait_until 30 "$job did not turn Failed" phase_is "rljob/$job" Failed
  [[ $(cond "rljob/$job" Failed reason) == InvalidSpec ]] ||
    fail "$job: Failed reason $(cond "rljob/$job" Failed reason), want InvalidSpec"
  message=$(cond "rljob/$job" Failed message)
  [[ $message == *"${WANT[$job]}"* ]] || fail "$job: the condition does not say '${WANT[$job]}': $message"
  [[ $job != broken2 || $message == *"$WANT2"* ]] || fail "$job: the condition does not say '$WANT2'"
  wait_until 30 "$job: no Warning Event InvalidSpec" has_event "$job" InvalidSpec
  events "$job" InvalidSpec | grep -qF "Warning: The spec is invalid: ${WANT[$job]}" ||
    fail "$job: the Event does not name the field: $(events "$job" InvalidSpec)"
  k8s_say "$job: Failed (InvalidSpec): $message"
done
alive

# ---- 2. a good job still runs --------------------------------------------------------------------
K8S_STEP="RLJob good"
kc apply -f - >/dev/null <<'YAML'
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata: {name: good, namespace: research}
spec:
  roles:
    rollout: {replicas: 2}
    trainer: {replicas: 1}
YAML
wait_until 60 "good did not get its 3 pods" has_pods good 3
wait_until 30 "good did not turn Pending" phase_is rljob/good Pending
[[ -z $(owned broken) && -z $(owned broken2) ]] ||
  fail "a refused job got children: $(owned broken) $(owned broken2)"
k8s_say "good: 3 pods, Pending; broken and broken2 have no children"

# ---- 3. the same operator process throughout -----------------------------------------------------
K8S_STEP="the operator process"
alive
! grep -qiE 'terminate|type_error|Reconciling a job threw' "$K8S_TMP/operator.log" ||
  fail "the operator log shows a throw: $(grep -iE 'terminate|type_error|Reconciling a job threw' "$K8S_TMP/operator.log" | head -3)"
k8s_say "the operator (pid $OP_PID) ran throughout"
k8s_test_finish "wrong-typed podTemplates Failed naming the field, no children, a good job" \
  "still runs, the operator never restarted"
