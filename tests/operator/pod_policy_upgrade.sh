#!/usr/bin/env bash
# Running jobs keep running when the operator moves to the Pod Security Standards policy (issue
# 41: `helm upgrade` from the previous chart), on a real etcd + kube-apiserver with kwok running
# a fake GPU node (scripts/k8s-env.sh) and the real tlt-operator under tests/operator/rbac.yaml:
#   1. the operator as the previous chart ran it (no pod-policy flags; the previous binary's
#      deny-list had no level, so it runs here at --pod-security=privileged, which refuses
#      nothing) runs the examples' jobs (examples/rljob-cluster.yaml,
#      examples/tst-hf-model-cluster.yaml) to Running;
#   2. the operator is replaced by one with the args `helm template` renders from this chart's
#      default values (--pod-security=restricted, the admin rules on);
#   3. after 10 s and a change to each job (a label, so each is reconciled again) both jobs are
#      still Running, not Failed, with the same pods (uids), none deleted or added.
# Stops every process it started (by PID) on exit, also on failure. Last line: PASS or FAIL.
# Usage: pod_policy_upgrade.sh TLT_OPERATOR_BINARY SOURCE_DIR   (K8S_BIN=DIR, KEEP=1)
set -euo pipefail
op=$1
src=$(cd "$2" && pwd)
source "$src/scripts/k8s-env.sh"

k8s_test_begin pod_policy_upgrade kwok helm
k8s_start_gpu_node

# ---- 1. the jobs under the previous policy ------------------------------------------------------
k8s_test_operator "$op" --watch-timeout 20 --pod-security privileged
OLD_PID=$OP_PID
K8S_STEP="the examples' jobs"
kc apply -f "$src/examples/rljob-cluster.yaml" >/dev/null
kc apply -f "$src/examples/tst-hf-model-cluster.yaml" >/dev/null
rl=$(kc get rljobs -n research -o 'jsonpath={.items[0].metadata.name}')
tst=$(kc get tstpretrainjobs -n research -o 'jsonpath={.items[0].metadata.name}')
wait_until 120 "rljob/$rl did not turn Running" phase_is "rljob/$rl" Running
wait_until 120 "tstj/$tst did not turn Running" phase_is "tstj/$tst" Running
pods() { kc get pods -n research -o 'jsonpath={range .items[*]}{.metadata.name}={.metadata.uid}{"\n"}{end}' | sort; }
before=$(pods)
n=$(wc -l <<<"$before")
k8s_say "previous policy: rljob/$rl and tstj/$tst Running, $n pods"

# ---- 2. the operator with this chart's default args ----------------------------------------------
K8S_STEP="render this chart's operator args"
mapfile -t args < <("$K8S_BIN/helm" template t "$src/helm/tlt" 2>/dev/null |
  grep -E '^ +- --pod-(security|policy)' | sed -E 's/^ +- //')
[[ " ${args[*]} " == *" --pod-security=restricted "* ]] || fail "the chart renders no --pod-security=restricted: ${args[*]}"
kill -TERM "$OLD_PID"
wait "$OLD_PID" 2>/dev/null || true
k8s_test_operator "$op" --watch-timeout 20 "${args[@]}"
k8s_say "operator restarted with ${args[*]}"

# ---- 3. the jobs keep running ---------------------------------------------------------------------
K8S_STEP="after the upgrade"
sleep 5
kc label rljob "$rl" -n research tlt.dev/upgraded=yes >/dev/null
kc label tstj "$tst" -n research tlt.dev/upgraded=yes >/dev/null
sleep 5
for j in "rljob/$rl" "tstj/$tst"; do
  phase_is "$j" Running || fail "$j is $(phase "$j" research) after the upgrade: $(cond "$j" Failed message)"
done
after=$(pods)
[[ $after == "$before" ]] || fail "the pods changed: before
$before
after
$after"
! grep -q ForbiddenByPodPolicy "$K8S_TMP/operator.log" || fail "the operator refused a job: $(grep ForbiddenByPodPolicy "$K8S_TMP/operator.log" | head -2)"
k8s_test_finish "rljob/$rl and tstj/$tst Running before and after the move to ${args[*]}, the" \
  "same $n pods"
