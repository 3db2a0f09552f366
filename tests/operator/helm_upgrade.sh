#!/usr/bin/env bash
# `helm upgrade --wait` of the chart with two operator replicas completes (issue 21, item 9), on
# a real etcd + kube-apiserver + kube-controller-manager + kube-scheduler with kwok nodes
# (scripts/k8s-env.sh; the binaries from scripts/k8s-tools.sh):
#   1. `helm install --wait` with replicaCount=2: the Deployment's two pods are made by the
#      controller-manager, bound by the scheduler and run by kwok;
#   2. each Running pod of the release gets a stand-in: the real tlt-operator started here with
#      the args the chart rendered into that pod, as the chart's ServiceAccount (a token of it,
#      so the chart's RBAC is what it runs with), its identity the pod's name. Exactly one of
#      them leads (the Lease's holder; tlt_operator_leader 1 on its /metrics, 0 on the other);
#   3. `helm upgrade --wait` with a changed value (operator.workers 2 -> 3: a new pod template,
#      so a new ReplicaSet), while this script keeps the stand-ins in step with the pods
#      (starts one for each new Running pod, stops the one of a pod that is deleted) and checks
#      every 0.2 s that at most one stand-in reports leader 1;
#   4. afterwards: revision 2 deployed; the Deployment has 2 updated, ready, available replicas;
#      exactly 2 pods, all of the new ReplicaSet, Ready, with --workers=3; the old ReplicaSet at
#      0 replicas with no pod left; exactly one leader, a stand-in of a new pod, holding the
#      Lease.
# kwok does not run probes: it marks a pod Ready as soon as it runs it, so this test does not
# show that the Deployment's readinessProbe passes on a standby replica. That /readyz answers 200
# on a standby (and on the leader) is asserted by operator.controller_apiserver.
# Stops every process it started (by PID) on exit, also on failure. Last line: PASS or FAIL.
# Usage: helm_upgrade.sh TLT_OPERATOR_BINARY SOURCE_DIR   (K8S_BIN=DIR, KEEP=1 as k8s-env.sh)
set -euo pipefail
op=$1
src=$(cd "$2" && pwd)
chart=$src/helm/tlt
source "$src/scripts/k8s-env.sh"

k8s_test_begin helm_upgrade helm kwok kube-controller-manager kube-scheduler
K8S_FAIL_LOGS="kube-controller-manager kube-scheduler kwok"
NS=tlt-system
fail() {
  # What the cluster made of the release, for the reader of a failure.
  kc get deployments,replicasets,pods -n "$NS" -o wide 2>&1 | sed 's/^/    /' || true
  kc get events -n "$NS" 2>&1 | tail -n 15 | sed 's/^/    /' || true
  k8s_fail "$1" $K8S_FAIL_LOGS
}
export HELM_CACHE_HOME=$K8S_TMP/helm/cache HELM_CONFIG_HOME=$K8S_TMP/helm/config
export HELM_DATA_HOME=$K8S_TMP/helm/data
hm() { "$K8S_BIN/helm" --kubeconfig "$KUBECONFIG" "$@"; }
REL=tlt
SEL=app.kubernetes.io/instance=$REL

k8s_start_kube_controllers || fail "$K8S_STEP"
k8s_start_kwok
k8s_kwok_nodes 2 0 | kc apply -f - >/dev/null
nodes_ready() {
  [[ $(kc get nodes -o 'jsonpath={.items[*].status.conditions[?(@.type=="Ready")].status}') == "True True" ]]
}
wait_until 60 "the two kwok nodes did not become Ready" nodes_ready
kc create namespace "$NS" >/dev/null
kc create namespace research >/dev/null
API_PORT=${K8S_SERVER##*:}

# ---- 1. install with two replicas ------------------------------------------------------------
K8S_STEP="helm install --wait (replicaCount=2)"
hm install "$REL" "$chart" -n "$NS" --set replicaCount=2 --wait --timeout 90s \
  >"$K8S_TMP/install.log" 2>&1 || { cat "$K8S_TMP/install.log"; fail "$K8S_STEP"; }
DEPLOY=$(kc get deployment -n "$NS" -l "$SEL" -o 'jsonpath={.items[0].metadata.name}')
SA=$(kc get deployment -n "$NS" "$DEPLOY" -o 'jsonpath={.spec.template.spec.serviceAccountName}')
LEASE=$(kc get deployment -n "$NS" "$DEPLOY" -o json |
  python3 -c 'import json,sys
args = json.load(sys.stdin)["spec"]["template"]["spec"]["containers"][0]["args"]
print(next(a.split("=", 1)[1] for a in args if a.startswith("--leader-election-id=")))')
mkdir -p "$K8S_TMP/sa"
kc create token "$SA" -n "$NS" --duration 1h >"$K8S_TMP/sa/token"
cp "$K8S_CA" "$K8S_TMP/sa/ca.crt"
k8s_say "helm install --wait: deployment/$DEPLOY with 2 pods Running on kwok; Lease $NS/$LEASE"

# ---- 2. stand-ins: the real operator for each Running pod ---------------------------------------
declare -A STANDIN_PID STANDIN_PORT  # pod name -> the stand-in's PID and metrics port
# running_pods: "NAME ARGS-JSON" of the release's pods that are Running and not being deleted.
running_pods() {
  kc get pods -n "$NS" -l "$SEL" -o json | python3 -c 'import json,sys
for p in json.load(sys.stdin)["items"]:
    if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp"):
        print(p["metadata"]["name"], json.dumps(p["spec"]["containers"][0]["args"]))'
}
start_standin() {  # POD ARGS-JSON
  local pod=$1 port args=()
  mapfile -t args < <(python3 -c 'import json,sys
for a in json.loads(sys.argv[1]):
    if not a.startswith("--metrics-port="):  # each stand-in gets a free port here
        print(a)' "$2")
  k8s_free_port port
  k8s_start "standin-$pod" "$K8S_TMP/standin-$pod.log" env KUBERNETES_SERVICE_HOST=127.0.0.1 \
    KUBERNETES_SERVICE_PORT="$API_PORT" POD_NAME="$pod" POD_NAMESPACE="$NS" "$op" "${args[@]}" \
    --service-account-dir "$K8S_TMP/sa" --metrics-port "$port" --metrics-bind-address 127.0.0.1 \
    --leader-election-identity "$pod"
  STANDIN_PID[$pod]=$K8S_LAST_PID
  STANDIN_PORT[$pod]=$port
}
stop_standin() {  # POD: SIGTERM (a leader releases the Lease), as the kubelet would
  local pod=$1 pid=${STANDIN_PID[$1]} n
  kill -TERM "$pid" 2>/dev/null || true
  for ((n = 0; n < 100; n++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  unset "STANDIN_PID[$pod]" "STANDIN_PORT[$pod]"
}
# sync_standins: a stand-in for each Running pod, none for a pod that is gone or terminating.
sync_standins() {
  local running pod args
  running=$(running_pods)
  while read -r pod args; do
    [[ -n $pod && -z ${STANDIN_PID[$pod]:-} ]] && start_standin "$pod" "$args"
  done <<<"$running"
  for pod in "${!STANDIN_PID[@]}"; do
    grep -q "^$pod " <<<"$running" || stop_standin "$pod"
  done
  return 0
}
# leaders: the pods whose stand-in reports tlt_operator_leader 1 (one name a line).
leaders() {
  local pod
  for pod in "${!STANDIN_PORT[@]}"; do
    curl -sf --max-time 2 "http://127.0.0.1:${STANDIN_PORT[$pod]}/metrics" 2>/dev/null |
      grep -q '^tlt_operator_leader 1' && echo "$pod"
  done
  return 0
}
lease_holder() { kc get lease -n "$NS" "$LEASE" -o 'jsonpath={.spec.holderIdentity}' 2>/dev/null; }
one_leader_holding_lease() {
  local l
  l=$(leaders)
  [[ $(grep -c . <<<"$l") == 1 && $(lease_holder) == "$l" ]]
}
sync_standins
[[ ${#STANDIN_PID[@]} == 2 ]] || fail "not 2 Running pods after helm install: ${!STANDIN_PID[*]}"
k8s_wait_until 60 "one of the two stand-ins did not lead (holding the Lease) within 60 s" \
  one_leader_holding_lease
first_leader=$(leaders)
k8s_say "stand-ins for ${!STANDIN_PID[*]}: $first_leader leads and holds the Lease"

# ---- 3. helm upgrade --wait with a changed value -----------------------------------------------
OLD_RS=$(kc get rs -n "$NS" -l "$SEL" -o 'jsonpath={.items[0].metadata.name}')
K8S_STEP="helm upgrade --wait (operator.workers=3)"
k8s_start helm-upgrade "$K8S_TMP/upgrade.log" "$K8S_BIN/helm" --kubeconfig "$KUBECONFIG" \
  upgrade "$REL" "$chart" -n "$NS" --reuse-values --set operator.workers=3 --wait --timeout 180s
HELM_PID=$K8S_LAST_PID
max_leaders=0 started=0 stopped=0
declare -A seen=()  # every pod that has had a stand-in
for pod in "${!STANDIN_PID[@]}"; do seen[$pod]=1; done
t_up=$SECONDS
while kill -0 "$HELM_PID" 2>/dev/null; do
  before=" ${!STANDIN_PID[*]} "
  sync_standins
  for pod in "${!STANDIN_PID[@]}"; do
    [[ -n ${seen[$pod]:-} ]] || { seen[$pod]=1; started=$((started + 1)); }
  done
  for pod in $before; do [[ -n ${STANDIN_PID[$pod]:-} ]] || stopped=$((stopped + 1)); done
  n=$(leaders | grep -c . || true)
  ((n > max_leaders)) && max_leaders=$n
  ((n <= 1)) || fail "$n stand-ins report leader 1 at once during the upgrade: $(leaders | tr '\n' ' ')"
  ((SECONDS - t_up < 200)) || fail "helm upgrade --wait still running after 200 s"
  sleep 0.2
done
wait "$HELM_PID" && rc=0 || rc=$?
((rc == 0)) || { cat "$K8S_TMP/upgrade.log"; fail "helm upgrade --wait exited $rc"; }
t_up=$((SECONDS - t_up))
sync_standins
k8s_say "helm upgrade --wait returned 0 after $t_up s; stand-ins started $started, stopped $stopped; at most $max_leaders leader at a time"

# ---- 4. the rollout is complete ----------------------------------------------------------------
K8S_STEP="after the upgrade"
status=$(hm status "$REL" -n "$NS" -o json | python3 -c 'import json,sys
s = json.load(sys.stdin); print(s["version"], s["info"]["status"])')
[[ $status == "2 deployed" ]] || fail "$K8S_STEP: the release is '$status', not '2 deployed'"
d=$(kc get deployment -n "$NS" "$DEPLOY" -o \
  'jsonpath={.status.replicas} {.status.updatedReplicas} {.status.readyReplicas} {.status.availableReplicas}')
[[ $d == "2 2 2 2" ]] || fail "$K8S_STEP: deployment replicas/updated/ready/available are '$d', not '2 2 2 2'"
NEW_RS=$(kc get rs -n "$NS" -l "$SEL" -o json | python3 -c 'import json,sys
for r in json.load(sys.stdin)["items"]:
    if r["spec"]["replicas"] > 0: print(r["metadata"]["name"])')
[[ $(wc -l <<<"$NEW_RS") == 1 && $NEW_RS != "$OLD_RS" ]] ||
  fail "$K8S_STEP: ReplicaSets with replicas > 0: '$NEW_RS' (old: $OLD_RS)"
[[ $(kc get rs -n "$NS" "$OLD_RS" -o 'jsonpath={.spec.replicas}/{.status.replicas}') == 0/0 ]] ||
  fail "$K8S_STEP: the old ReplicaSet $OLD_RS is not at 0 replicas"
pods=$(kc get pods -n "$NS" -l "$SEL" -o json | python3 -c 'import json,sys
for p in json.load(sys.stdin)["items"]:
    ready = [c["status"] for c in p["status"].get("conditions", []) if c["type"] == "Ready"]
    owner = p["metadata"]["ownerReferences"][0]["name"]
    print(p["metadata"]["name"], owner, p["status"].get("phase"), ready[0] if ready else "-",
          int("--workers=3" in p["spec"]["containers"][0]["args"]),
          int(bool(p["metadata"].get("deletionTimestamp"))))')
[[ $(wc -l <<<"$pods") == 2 ]] || fail "$K8S_STEP: not exactly 2 pods of the release: $pods"
while read -r pod owner phase ready workers3 deleting; do
  [[ $owner == "$NEW_RS" && $phase == Running && $ready == True && $workers3 == 1 && $deleting == 0 ]] ||
    fail "$K8S_STEP: pod $pod: ReplicaSet $owner, $phase, Ready=$ready, --workers=3: $workers3, deleting: $deleting (want $NEW_RS, Running, True, 1, 0)"
done <<<"$pods"
k8s_wait_until 60 "after the upgrade, not exactly one stand-in leads holding the Lease" \
  one_leader_holding_lease
leader=$(leaders)
grep -q "^$leader " <<<"$pods" || fail "$K8S_STEP: the leader $leader is not a pod of the new ReplicaSet"
for pod in "${!STANDIN_PID[@]}"; do
  kill -0 "${STANDIN_PID[$pod]}" 2>/dev/null || fail "$K8S_STEP: the stand-in of $pod exited"
done
k8s_test_finish "install 2 replicas, upgrade --wait in $t_up s: ReplicaSet $OLD_RS -> $NEW_RS," \
  "2/2 new pods Ready, old ones gone, $started stand-ins started and $stopped stopped, at most" \
  "$max_leaders leader at a time, $leader leads and holds the Lease"
