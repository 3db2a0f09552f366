#!/usr/bin/env bash
# Per-job identity (issue 21, item 3) on a real etcd + kube-apiserver (scripts/k8s-env.sh) with
# kwok running a fake GPU node, the real tlt-operator under tests/operator/rbac.yaml (no escalate,
# no bind):
#   1. two RLJobs, alpha and beta: each gets its own ServiceAccount, Role and RoleBinding
#      (<job>-rl, owned by the job) and its pods run as that ServiceAccount;
#   2. `kubectl auth can-i --as system:serviceaccount:research:alpha-rl`: get alpha's pods and
#      patch alpha-trainer-0: yes; get beta's pod, patch alpha's rollout pod, list or watch pods,
#      create pods, get or list secrets, get configmaps: no. The namespace's default
#      ServiceAccount: nothing. The same with a real token of alpha-rl against the apiserver:
#      GET alpha-rollout-0 200, GET beta-rollout-0 403, a merge patch of alpha-trainer-0's
#      tlt.dev/progress annotation 200;
#   3. scaling alpha's rollout 2 -> 3 grants get on alpha-rollout-2 (the Role follows the pods);
#      a Role widened by hand is put back;
#   4. a ServiceAccount named gamma-rl made by someone else before the job gamma: not adopted,
#      gamma turns Blocked (AlreadyExists), no pod of gamma is made;
#   5. deleting alpha removes its ServiceAccount, Role and RoleBinding.
# Stops every process it started (by PID) on exit, also on failure. Last line: PASS or FAIL.
# Usage: job_identity.sh TLT_OPERATOR_BINARY SOURCE_DIR   (K8S_BIN=DIR, KEEP=1)
set -euo pipefail
op=$1
src=$(cd "$2" && pwd)
source "$src/scripts/k8s-env.sh"

N_YES=0
N_NO=0
k8s_test_begin job_identity kwok
k8s_start_gpu_node
k8s_test_operator "$op" --watch-timeout 20

rljob() {  # NAME ROLLOUT_REPLICAS
  kc apply -f - >/dev/null <<YAML
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata: {name: $1, namespace: research}
spec:
  roles:
    rollout: {replicas: $2}
    trainer: {replicas: 1}
YAML
}

# ---- 1. each job its own identity -----------------------------------------------------------------
K8S_STEP="two RLJobs"
rljob alpha 2
rljob beta 1
wait_until 60 "alpha did not turn Running" phase_is rljob/alpha Running
wait_until 60 "beta did not turn Running" phase_is rljob/beta Running
for job in alpha beta; do
  uid=$(kc get rljob "$job" -n research -o 'jsonpath={.metadata.uid}')
  for kind in serviceaccount role rolebinding; do
    owner=$(kc get "$kind" "$job-rl" -n research -o 'jsonpath={.metadata.ownerReferences[0].uid}' 2>/dev/null) ||
      fail "$kind $job-rl missing"
    [[ $owner == "$uid" ]] || fail "$kind $job-rl is not owned by RLJob $job"
  done
  for pod in $(kc get pods -n research -l "tlt.dev/job=$job" -o name); do
    [[ $(kc get "$pod" -n research -o 'jsonpath={.spec.serviceAccountName}') == "$job-rl" ]] ||
      fail "$pod does not run as $job-rl"
  done
done
[[ $(kc get pod alpha-trainer-0 -n research -o 'jsonpath={.spec.automountServiceAccountToken}') == false ]] ||
  fail "alpha-trainer-0 has the token automounted (into every container)"
[[ $(kc get pod alpha-trainer-0 -n research -o 'jsonpath={.spec.containers[?(@.name=="tlt")].volumeMounts[?(@.name=="tlt-token")].mountPath}') == \
  /var/run/secrets/kubernetes.io/serviceaccount ]] ||
  fail "alpha-trainer-0's tlt container has no token (its runtime reads assignments, writes progress)"
[[ $(kc get pod alpha-rollout-0 -n research -o 'jsonpath={.spec.automountServiceAccountToken}') == false ]] ||
  fail "alpha-rollout-0 has a token mounted; its runtime never calls the apiserver"
[[ -z $(kc get pod alpha-rollout-0 -n research -o 'jsonpath={.spec.volumes[?(@.name=="tlt-token")].name}') ]] ||
  fail "alpha-rollout-0 has a token volume; its runtime never calls the apiserver"
k8s_say "alpha and beta: own ServiceAccount, Role, RoleBinding; pods run as <job>-rl"

# ---- 2. what the identity may do ---------------------------------------------------------------------
ALPHA=system:serviceaccount:research:alpha-rl
DEFAULT=system:serviceaccount:research:default
yes_() {  # AS ARGS...
  local as=$1
  shift
  K8S_STEP="$as may not: $*; it should"
  [[ $(kc auth can-i --as "$as" "$@" -n research 2>/dev/null || true) == yes ]] || fail "$K8S_STEP"
  N_YES=$((N_YES + 1))
}
no_() {
  local as=$1
  shift
  K8S_STEP="$as may: $*; least privilege says no"
  [[ $(kc auth can-i --as "$as" "$@" -n research 2>/dev/null || true) == no ]] || fail "$K8S_STEP"
  N_NO=$((N_NO + 1))
}
yes_ "$ALPHA" get pods/alpha-rollout-0
yes_ "$ALPHA" get pods/alpha-rollout-1
yes_ "$ALPHA" get pods/alpha-trainer-0
yes_ "$ALPHA" patch pods/alpha-trainer-0
no_ "$ALPHA" get pods/beta-rollout-0
no_ "$ALPHA" get pods/beta-trainer-0
no_ "$ALPHA" patch pods/alpha-rollout-0
no_ "$ALPHA" patch pods/beta-trainer-0
no_ "$ALPHA" list pods
no_ "$ALPHA" watch pods
no_ "$ALPHA" create pods
no_ "$ALPHA" delete pods/alpha-rollout-0
no_ "$ALPHA" get secrets
no_ "$ALPHA" list secrets
no_ "$ALPHA" get configmaps/alpha-rl-spec
no_ "$ALPHA" create pods/exec
no_ "$ALPHA" patch roles/alpha-rl
for verb in get list patch create; do no_ "$DEFAULT" "$verb" pods; done
no_ "$DEFAULT" get secrets

K8S_STEP="a token of alpha-rl"
token=$(kc create token alpha-rl -n research --duration 10m)
call() {  # METHOD PATH [BODY] -> the HTTP status
  local args=(-s -o /dev/null -w '%{http_code}' --cacert "$K8S_CA" -H "Authorization: Bearer $token"
    -X "$1")
  [[ -n ${3:-} ]] && args+=(-H 'Content-Type: application/merge-patch+json' --data "$3")
  curl "${args[@]}" "$K8S_SERVER/api/v1/namespaces/research/pods$2"
}
[[ $(call GET /alpha-rollout-0) == 200 ]] || fail "alpha-rl's token cannot GET alpha-rollout-0"
[[ $(call GET /beta-rollout-0) == 403 ]] || fail "alpha-rl's token is not refused beta-rollout-0"
[[ $(call GET "") == 403 ]] || fail "alpha-rl's token is not refused a LIST of pods"
[[ $(call PATCH /alpha-trainer-0 '{"metadata":{"annotations":{"tlt.dev/progress":"{\"step\":3}"}}}') == 200 ]] ||
  fail "alpha-rl's token cannot patch alpha-trainer-0's progress annotation"
[[ $(call PATCH /alpha-rollout-0 '{"metadata":{"annotations":{"x":"y"}}}') == 403 ]] ||
  fail "alpha-rl's token may patch alpha-rollout-0"
k8s_say "alpha-rl: $N_YES allowed, $N_NO denied (can-i); its token: GET own pod 200, other job's 403, list 403, patch trainer 200, rollout 403"

# ---- 3. the Role follows the pods; a widened Role is put back ---------------------------------
K8S_STEP="scale alpha's rollout to 3"
kc patch rljob alpha -n research --type merge -p '{"spec":{"roles":{"rollout":{"replicas":3}}}}' >/dev/null
can_get_third() { [[ $(kc auth can-i --as "$ALPHA" get pods/alpha-rollout-2 -n research 2>/dev/null || true) == yes ]]; }
wait_until 30 "the Role of alpha did not grant get on alpha-rollout-2 after the scale" can_get_third
K8S_STEP="widen alpha's Role by hand"
kc patch role alpha-rl -n research --type json \
  -p '[{"op":"add","path":"/rules/-","value":{"apiGroups":[""],"resources":["secrets"],"verbs":["get","list"]}}]' >/dev/null
no_secrets() { [[ $(kc auth can-i --as "$ALPHA" list secrets -n research 2>/dev/null || true) == no ]]; }
wait_until 30 "the widened Role of alpha was not put back" no_secrets
k8s_say "the Role follows scaling (alpha-rollout-2) and a widened Role is restored"

# ---- 4. a foreign ServiceAccount of the name ----------------------------------------------------
K8S_STEP="a foreign ServiceAccount gamma-rl"
kc create serviceaccount gamma-rl -n research >/dev/null
rljob gamma 1
wait_until 30 "gamma did not turn Blocked" phase_is rljob/gamma Blocked
reason=$(kc get rljob gamma -n research -o 'jsonpath={.status.conditions[?(@.type=="Created")].reason}')
[[ $reason == AlreadyExists ]] || fail "gamma's Created reason is $reason, want AlreadyExists"
[[ -z $(kc get serviceaccount gamma-rl -n research -o 'jsonpath={.metadata.ownerReferences}') ]] ||
  fail "the foreign ServiceAccount gamma-rl was adopted"
[[ -z $(kc get pods -n research -l tlt.dev/job=gamma -o name) ]] || fail "gamma has pods"
k8s_say "a foreign ServiceAccount gamma-rl: not adopted, gamma Blocked (AlreadyExists), no pods"

# ---- 5. deleted with the job -------------------------------------------------------------------
K8S_STEP="delete alpha"
kc delete rljob alpha -n research --wait=false >/dev/null
gone() { [[ -z $(kc get serviceaccount,role,rolebinding -n research -l tlt.dev/job=alpha -o name) ]]; }
wait_until 60 "alpha's ServiceAccount, Role or RoleBinding outlived it" gone
no_ "$ALPHA" get pods/alpha-trainer-0
k8s_say "alpha deleted: its identity is gone"
k8s_test_finish "own ServiceAccount/Role/RoleBinding per job, $N_YES allowed and $N_NO denied" \
  "checks, real token calls, Role follows scaling, foreign SA not adopted, deleted with the job"
