#!/usr/bin/env bash
# Operator benchmark, side by side in one run, on a real etcd + kube-apiserver (scripts/k8s-env.sh)
# with kwok fake GPU nodes (no kube-scheduler: bench/operator/rljob.yaml pins pods with nodeName):
#   1. direct: the apiserver's own pace for the same pods: N*5 pods (bench/operator/pod.yaml,
#      what the operator would make) created by P parallel `kubectl create -f` clients; then
#      deleted again;
#   2. operator: the real build/bin/tlt-operator, under the least-privilege RBAC of
#      tests/operator/rbac.yaml with a ServiceAccount token, in-cluster style and with the flags
#      of tests/operator/controller_apiserver.sh; N RLJobs of 5 pods each (bench/operator/rljob.yaml,
#      from examples/rljob-cluster.yaml) applied by P parallel `kubectl apply -f` clients.
# bench/operator/measure.py watches from just before the clients start: seconds until every pod
# exists, every pod Running, every RLJob status.phase Running; pods per second; reconciles per
# second (tlt_operator_reconcile_total from /metrics); the operator's peak RSS (VmHWM, sampled),
# its CPU time and the load average (the machine may be shared: read the numbers with the load).
# Prints the table, the ratio operator pods/s / direct pods/s, and PASS/MISS against the goals
# of issue 6 (>= 50 pods/s, peak RSS < 64 MiB). Stops everything it started on exit.
# What it leaves out: scheduling (pods are pre-bound), image pulls, a garbage collector.
# Usage: bench/operator.sh [--jobs N (200)] [--parallel P (4)] [--timeout S (300, per phase)]
#                          [--operator BINARY (build/bin/tlt-operator)] [-- OPERATOR FLAGS...]
#        (K8S_BIN=DIR: the binaries of scripts/k8s-tools.sh; KEEP=1 keeps logs and manifests)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
here=$src/bench/operator
n_jobs=200 parallel=4 timeout=300 op=$src/build/bin/tlt-operator op_args=()
client_s_direct='' client_s_bench=''  # set by run_phase (printf -v)
usage() { sed -n '/^# Usage:/,/^$/p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
while (($#)); do
  case $1 in
    --jobs) n_jobs=$2; shift 2 ;;
    --parallel) parallel=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    --operator) op=$2; shift 2 ;;
    --) shift; op_args=("$@"); break ;;
    -h | --help) usage 0 ;;
    *) echo "bench/operator: unknown argument $1" >&2; usage 2 >&2 ;;
  esac
done
for v in n_jobs parallel timeout; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "bench/operator: --${v/n_/} wants a positive integer" >&2; exit 2; }
done
[[ -x $op ]] || { echo "bench/operator: $op is not built (cmake --build build --target tlt-operator)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "bench/operator: python3 is needed" >&2; exit 2; }
n_pods=$((n_jobs * 5))
pods_per_node=100
n_nodes=$(((n_pods + pods_per_node - 1) / pods_per_node))

source "$src/scripts/k8s-env.sh"
on_exit() { [[ $1 -eq 0 ]] || echo "bench/operator: FAILED: $K8S_STEP" >&2; }
K8S_ON_EXIT=on_exit
k8s_env_begin bench-operator kwok
k8s_say "$n_jobs RLJobs x 5 pods = $n_pods pods on $n_nodes kwok nodes; $parallel parallel clients; temp dir $K8S_TMP"

fail() {  # MESSAGE: the last lines of our logs, then exit (the trap stops everything)
  K8S_STEP=$1
  local f
  for f in kwok operator measure-direct measure-bench; do
    [[ -s "$K8S_TMP/$f.log" ]] || continue
    k8s_say "last lines of $f.log:"
    tail -n 8 "$K8S_TMP/$f.log" | cut -c1-240 | sed 's/^/    /'
  done
  exit 1
}
wait_until() {  # SECONDS WHAT CMD...: retry CMD every half second; fail with WHAT when time is up
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || fail "$what (waited $1 s)"
    sleep 0.5
  done
}
now() { date +%s.%N; }

# ---- kwok and its nodes ----------------------------------------------------------------------
K8S_STEP="start kwok"
k8s_start_kwok
node_name() { echo "bench-node-$(($1 * 5 / pods_per_node))"; }  # JOB_INDEX -> its node
k8s_kwok_nodes "$n_nodes" "$pods_per_node" >"$K8S_TMP/nodes.yaml"
K8S_STEP="create the kwok nodes"
kc apply -f "$K8S_TMP/nodes.yaml" >/dev/null
ready_nodes() {
  [[ $(kc get nodes -o 'jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
    grep -c True) -eq $n_nodes ]]
}
K8S_STEP="the $n_nodes fake nodes did not become Ready within 60 s"
k8s_wait_for 60 "$KWOK_PID" ready_nodes || fail "$K8S_STEP"

# ---- CRDs, namespaces, RBAC, the operator's token ---------------------------------------------
K8S_STEP="install the CRDs"
kc apply -f "$src/crds/" >/dev/null
kc wait --for condition=established --timeout=60s crd/rljobs.tlt.dev crd/tstpretrainjobs.tlt.dev \
  >/dev/null
for ns in bench direct; do
  kc create namespace $ns >/dev/null
  kc create serviceaccount default -n $ns >/dev/null  # no controller-manager makes it
done
K8S_STEP="apply tests/operator/rbac.yaml"
kc apply -f "$src/tests/operator/rbac.yaml" >/dev/null
mkdir -p "$K8S_TMP/sa"
kc create token tlt-operator -n tlt-system --duration 2h >"$K8S_TMP/sa/token"
cp "$K8S_CA" "$K8S_TMP/sa/ca.crt"
printf '%s' "$K8S_TOKEN" >"$K8S_TMP/admin-token"
kc api-resources >/dev/null  # a warm discovery cache for the parallel clients

# ---- manifests: P files each, jobs spread round-robin -----------------------------------------
K8S_STEP="write the manifests"
mkdir -p "$K8S_TMP/direct" "$K8S_TMP/bench"
job_tmpl=$(<"$here/rljob.yaml")
pod_tmpl=$(<"$here/pod.yaml")
for ((i = 0; i < n_jobs; i++)); do
  job=bench-$i node=$(node_name $i) c=$((i % parallel))
  s=${job_tmpl//@JOB@/$job}
  printf '%s\n---\n' "${s//@NODE@/$node}" >>"$K8S_TMP/bench/$c.yaml"
  for ((k = 0; k < 5; k++)); do
    s=${pod_tmpl//@NAME@/$job-rollout-$k}
    s=${s//@JOB@/$job}
    s=${s//@INDEX@/$k}
    printf '%s\n---\n' "${s//@NODE@/$node}" >>"$K8S_TMP/direct/$c.yaml"
  done
done

# run_phase NAME NAMESPACE JOBS VERB [MEASURE FLAGS...]: starts measure.py on NAMESPACE, then the
# P clients (kubectl VERB -f NAME/<c>.yaml) at once; waits for both; $NAME.t0 holds the start.
run_phase() {
  local name=$1 ns=$2 jobs=$3 verb=$4 c pid mpid rc=0 t_client
  shift 4
  K8S_STEP="$name: start the watcher"
  rm -f "$K8S_TMP/$name.ready"
  k8s_start "measure-$name" "$K8S_TMP/measure-$name.log" python3 "$here/measure.py" watch \
    --server "$K8S_SERVER" --token-file "$K8S_TMP/admin-token" --ca "$K8S_CA" --namespace "$ns" \
    --pods "$n_pods" --jobs "$jobs" --timeout "$timeout" --ready "$K8S_TMP/$name.ready" \
    --out "$K8S_TMP/$name.json" "$@"
  mpid=$K8S_LAST_PID
  k8s_wait_for 60 "$mpid" test -e "$K8S_TMP/$name.ready" ||
    fail "$name: the watcher did not get its watches up within 60 s"
  K8S_STEP="$name: $parallel clients running kubectl $verb"
  now >"$K8S_TMP/$name.t0"
  local pids=()
  for ((c = 0; c < parallel && c < n_jobs; c++)); do
    k8s_start "kubectl-$name-$c" "$K8S_TMP/kubectl-$name-$c.log" \
      "$K8S_BIN/kubectl" --kubeconfig "$KUBECONFIG" --cache-dir "$K8S_TMP/kube-cache" \
      "$verb" -f "$K8S_TMP/$name/$c.yaml"
    pids+=("$K8S_LAST_PID")
  done
  local deadline=$((SECONDS + timeout)) alive
  while :; do  # the clients, bounded by --timeout (a kubectl can hang on a stuck apiserver)
    alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    ((alive)) || break
    ((SECONDS < deadline)) || fail "$name: the kubectl $verb clients did not finish within $timeout s (--timeout)"
    sleep 0.1
  done
  for pid in "${pids[@]}"; do
    wait "$pid" || fail "$name: kubectl $verb failed: $(grep -hv ' created$' \
      "$K8S_TMP/kubectl-$name-"*.log | head -5)"
  done
  t_client=$(python3 -c "import sys; print('%.2f' % ($(now) - float(sys.argv[1])))" "$(<"$K8S_TMP/$name.t0")")
  printf -v "client_s_$name" '%s' "$t_client"
  k8s_say "$name: the $parallel kubectl $verb clients finished in $t_client s; waiting for Running"
  K8S_STEP="$name: waiting for every pod (and RLJob) to be Running (up to $timeout s)"
  wait "$mpid" || rc=$?
  [[ $rc -eq 0 ]] || fail "$name: $(tail -n 1 "$K8S_TMP/measure-$name.log")"
}

# ---- 1. direct: plain kubectl create of the same pods -----------------------------------------
k8s_say "direct: $n_pods pods by $parallel parallel kubectl create clients"
run_phase direct direct 0 create
K8S_STEP="direct: delete the pods"
curl -sf --cacert "$K8S_CA" -H "Authorization: Bearer $K8S_TOKEN" -X DELETE \
  "$K8S_SERVER/api/v1/namespaces/direct/pods?gracePeriodSeconds=0" >/dev/null
no_direct_pods() { [[ -z $(kc get pods -n direct -o name) ]]; }
wait_until 120 "direct: the pods were not gone within 120 s" no_direct_pods
sleep 2  # let kwok and the apiserver settle

# ---- 2. the operator --------------------------------------------------------------------------
K8S_STEP="start tlt-operator"
k8s_free_port METRICS_PORT
API_PORT=${K8S_SERVER##*:}
k8s_start operator "$K8S_TMP/operator.log" env KUBERNETES_SERVICE_HOST=127.0.0.1 \
  KUBERNETES_SERVICE_PORT="$API_PORT" "$op" --service-account-dir "$K8S_TMP/sa" \
  --metrics-port "$METRICS_PORT" --metrics-bind-address 127.0.0.1 \
  --runtime-image registry.invalid/tlt:bench --leader-elect \
  --leader-election-namespace tlt-system --leader-election-identity bench \
  --pod-policy-allow nodeName ${op_args[@]+"${op_args[@]}"}
OP_PID=$K8S_LAST_PID
METRICS=http://127.0.0.1:$METRICS_PORT/metrics
K8S_STEP="tlt-operator did not report ready on /readyz within 30 s"
k8s_wait_for 30 "$OP_PID" curl -sf "http://127.0.0.1:$METRICS_PORT/readyz" || fail "$K8S_STEP"
k8s_say "tlt-operator ready: $("$op" --version 2>&1 | head -1), built $(date -r "$op" '+%F %T'), pid $OP_PID${op_args[*]+, flags: ${op_args[*]}}; $n_jobs RLJobs by $parallel parallel kubectl apply clients"
run_phase bench bench "$n_jobs" apply --pid "$OP_PID" --metrics "$METRICS"
kill -0 "$OP_PID" 2>/dev/null || fail "tlt-operator exited"
refused=$(grep -m1 'HTTP 403' "$K8S_TMP/operator.log" || true)
[[ -z $refused ]] || k8s_say "warning: the operator was refused a call: $refused"

# ---- report -----------------------------------------------------------------------------------
K8S_STEP="report"
echo
python3 "$here/measure.py" report --operator "$K8S_TMP/bench.json" --direct "$K8S_TMP/direct.json" \
  --operator-t0 "$K8S_TMP/bench.t0" --direct-t0 "$K8S_TMP/direct.t0" --jobs "$n_jobs" \
  --pods "$n_pods" --parallel "$parallel" --op-client-s "$client_s_bench" \
  --di-client-s "$client_s_direct"
