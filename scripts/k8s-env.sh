# shellcheck shell=bash
# A throwaway Kubernetes control plane for tests, to be sourced (not run): etcd and a
# kube-apiserver on 127.0.0.1 with token auth, RBAC and service-account keys (as envtest starts
# them), in a temp dir, from the binaries that scripts/k8s-tools.sh builds and caches.
#
# A test script (tests/operator/*.sh; "the test layer" at the end of this file):
#   source "$src/scripts/k8s-env.sh"
#   k8s_test_begin my_test kwok           # temp dir, traps, control plane; kwok must be there
#   k8s_start_gpu_node                    # kwok and its fake GPU node (optional)
#   k8s_test_operator "$op" --watch-timeout 20   # CRDs, RBAC, a running tlt-operator (optional)
#   K8S_STEP="what is being done"; ... || fail "why"; wait_until 30 "what" CMD...
#   k8s_test_finish "what passed"         # last line: PASS: my_test: what passed (N s)
# A failure anywhere (set -e, fail, exit 1, a signal) prints FAIL: my_test: $K8S_STEP last.
# Anything else (a bench) that brings its own verdict: K8S_ON_EXIT=fn; k8s_env_begin NAME [TOOL...].
#
# After k8s_start_control_plane: K8S_SERVER (https://127.0.0.1:PORT), K8S_TOKEN (a
# system:masters bearer token), K8S_CA (the apiserver's self-signed serving certificate),
# KUBECONFIG (token + CA, written in $K8S_TMP), K8S_BIN (the binaries). Client certificates work
# too: K8S_CLIENT_CA / K8S_CLIENT_CA_KEY (the CA of --client-ca-file, to sign more) and
# K8S_CLIENT_CERT / K8S_CLIENT_KEY (PEM files: user tlt-cert-user in group system:masters).
# K8S_BIN=DIR uses the binaries in DIR; KEEP=1 keeps $K8S_TMP (logs, certs) afterwards.
# k8s_env_exit_trap prints the logs' last lines when the script fails; K8S_ON_EXIT (a function
# name, called with the exit code) prints the verdict; when it returns non-zero, an exit code 0
# becomes 1.
# Needs: openssl, bash's /dev/tcp (free ports).

k8s_say() { printf '%s: %s\n' "${K8S_ENV_NAME:-k8s-env}" "$*"; }

K8S_PIDS=()              # every process started here, in start order
declare -A K8S_NAMES=()  # PID -> name, for messages
K8S_STEP="setup"         # what was being done, for failure messages
K8S_TAKEN=" "            # ports handed out
K8S_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)  # the source tree this file is in

# k8s_need TOOL...: each TOOL is a binary of $K8S_BIN (etcd, kube-apiserver, kubectl, kwok, helm,
# kube-controller-manager, kube-scheduler, kueue: scripts/k8s-tools.sh builds them) or, for any
# other name (openssl, prometheus), a command on PATH (scripts/setup.sh installs them); else sets
# K8S_STEP to what is missing and returns 1.
k8s_need() {
  local t
  for t in "$@"; do
    case $t in
      etcd | kube-apiserver | kubectl | kwok | helm | kube-controller-manager | kube-scheduler | \
        kueue)
        [[ -x "$K8S_BIN/$t" ]] && continue
        K8S_STEP="$K8S_BIN/$t missing (run scripts/k8s-tools.sh${t/#kueue/ kueue})" ;;
      *)
        command -v "$t" >/dev/null 2>&1 && continue
        K8S_STEP="'$t' is not installed (scripts/setup.sh installs it)" ;;
    esac
    return 1
  done
}

# k8s_env_init NAME [OPTIONAL_TOOL...]: binaries (built once by scripts/k8s-tools.sh if not
# cached, with its optional tools -- kueue -- when named) and a temp dir.
k8s_env_init() {
  K8S_ENV_NAME=$1
  shift
  if [[ -z ${K8S_BIN:-} ]]; then
    k8s_say "finding (or, the first time, building) the Kubernetes binaries:" \
      "scripts/k8s-tools.sh $*"
    K8S_BIN=$("$K8S_SRC/scripts/k8s-tools.sh" "$@" | tail -1) || {
      K8S_STEP="scripts/k8s-tools.sh could not provide the binaries (see above)"
      k8s_say "$K8S_STEP"
      return 1
    }
  fi
  k8s_need etcd kube-apiserver kubectl openssl || { k8s_say "$K8S_STEP"; return 1; }
  K8S_TMP=$(mktemp -d "${TMPDIR:-/tmp}/tlt-${K8S_ENV_NAME// /-}.XXXXXX")
  export KUBECONFIG="$K8S_TMP/kubeconfig"  # keeps the caller's kubeconfig out of this
  # The script's own stdout/stderr, for the exit trap (a signal may arrive during a redirection).
  exec 8>&1 9>&2
}

# Stops what was started, newest first: TERM, up to 10 s grace, then KILL; then waits on each.
k8s_stop_all() {
  local i pid n
  for ((i = ${#K8S_PIDS[@]} - 1; i >= 0; i--)); do
    pid=${K8S_PIDS[i]}
    kill -TERM "$pid" 2>/dev/null || continue
    for ((n = 0; n < 100; n++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  K8S_PIDS=()
}

k8s_env_exit_trap() {
  local rc=$?
  trap - EXIT INT TERM
  exec 1>&8 2>&9
  k8s_stop_all
  if [[ $rc -ne 0 && -n ${K8S_TMP:-} ]]; then
    local f
    for f in etcd kube-apiserver; do
      [[ -s "$K8S_TMP/$f.log" ]] || continue
      k8s_say "last lines of $f.log:"
      tail -n 15 "$K8S_TMP/$f.log" | sed 's/^/    /'
    done
  fi
  if [[ -n ${K8S_TMP:-} ]]; then
    if [[ -n ${KEEP:-} ]]; then k8s_say "kept $K8S_TMP"; else rm -rf "$K8S_TMP"; fi
  fi
  if [[ -n ${K8S_ON_EXIT:-} ]] && ! "$K8S_ON_EXIT" "$rc" && [[ $rc -eq 0 ]]; then rc=1; fi
  exit "$rc"
}

# k8s_free_port VAR: a port on 127.0.0.1 that nothing listens on and not handed out yet (so not
# to be called in a subshell).
k8s_free_port() {
  local p tries
  for ((tries = 0; tries < 200; tries++)); do
    p=$((20000 + RANDOM % 10000))
    [[ $K8S_TAKEN == *" $p "* ]] && continue
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      K8S_TAKEN+="$p "
      printf -v "$1" '%s' "$p"
      return 0
    fi
  done
  return 1
}

# k8s_wait_for SECONDS PID CMD...: retry CMD every half second until it succeeds; give up when
# the time is over or process PID has died.
k8s_wait_for() {
  local deadline=$((SECONDS + $1)) pid=$2
  shift 2
  until "$@" >/dev/null 2>&1; do
    if ! kill -0 "$pid" 2>/dev/null; then
      K8S_STEP+=" (${K8S_NAMES[$pid]:-pid $pid} exited early; its log follows)"
      return 1
    fi
    ((SECONDS < deadline)) || return 1
    sleep 0.5
  done
}

# k8s_fail MESSAGE [LOG...]: fails the step MESSAGE (K8S_STEP) after printing the last 25 lines of
# each $K8S_TMP/LOG.log (default: operator prometheus kwok); exits 1.
k8s_fail() {
  K8S_STEP=$1
  shift
  local f
  for f in "${@:-operator prometheus kwok}"; do
    for f in $f; do
      [[ -s "$K8S_TMP/$f.log" ]] || continue
      k8s_say "last lines of $f.log:"
      tail -n 25 "$K8S_TMP/$f.log" | sed 's/^/    /'
    done
  done
  exit 1
}

# k8s_wait_until SECONDS WHAT CMD...: runs CMD (quietly) every 0.2 s until it succeeds; after
# SECONDS, or as soon as the process K8S_WATCH_PID (when set) has exited, k8s_fail WHAT with the
# logs named in K8S_FAIL_LOGS.
k8s_wait_until() {
  local limit=$1 what=$2
  local deadline=$((SECONDS + limit))
  shift 2
  until "$@" >/dev/null 2>&1; do
    # shellcheck disable=SC2086
    ((SECONDS < deadline)) || k8s_fail "$what (waited $limit s)" ${K8S_FAIL_LOGS:-}
    if [[ -n ${K8S_WATCH_PID:-} ]] && ! kill -0 "$K8S_WATCH_PID" 2>/dev/null; then
      # shellcheck disable=SC2086
      k8s_fail "$what: ${K8S_NAMES[$K8S_WATCH_PID]:-pid $K8S_WATCH_PID} exited" ${K8S_FAIL_LOGS:-}
    fi
    sleep 0.2
  done
}

# k8s_install_operator: the CRDs of this tree (waited Established), namespace research with its
# default ServiceAccount, the operator's least-privilege RBAC (tests/operator/rbac.yaml) and, for
# the operator to run in-cluster style, its ServiceAccount token and the CA in $K8S_TMP/sa; sets
# API_PORT and K8S_INSTALLED=1.
k8s_install_operator() {
  K8S_STEP="install the CRDs and tests/operator/rbac.yaml"
  kc apply -f "$K8S_SRC/crds/" >/dev/null
  kc wait --for condition=established --timeout=60s crd/rljobs.tlt.dev crd/tstpretrainjobs.tlt.dev \
    >/dev/null
  kc create namespace research >/dev/null
  # No controller-manager: the default ServiceAccount that pod admission wants is made by hand.
  kc create serviceaccount default -n research >/dev/null
  kc apply -f "$K8S_SRC/tests/operator/rbac.yaml" >/dev/null
  mkdir -p "$K8S_TMP/sa"
  kc create token tlt-operator -n tlt-system --duration 2h >"$K8S_TMP/sa/token"
  cp "$K8S_CA" "$K8S_TMP/sa/ca.crt"
  API_PORT=${K8S_SERVER##*:}
  K8S_INSTALLED=1
}

# k8s_start_operator [--name NAME] [--api-port PORT] BINARY METRICS_PORT [FLAGS...]: tlt-operator
# in-cluster style (the token of k8s_install_operator) against 127.0.0.1:PORT (default API_PORT:
# the apiserver), log NAME.log (NAME default operator), metrics on 127.0.0.1:METRICS_PORT; waits
# up to 30 s for /readyz (else returns 1, K8S_STEP saying so). Sets K8S_LAST_PID, and OP_PID
# when NAME is operator.
k8s_start_operator() {
  local name=operator api_port=${API_PORT:-}
  while [[ $1 == --* ]]; do
    case $1 in
      --name) name=$2 ;;
      --api-port) api_port=$2 ;;
      *) K8S_STEP="k8s_start_operator: unknown option $1"; return 1 ;;
    esac
    shift 2
  done
  local bin=$1 port=$2 pid
  shift 2
  k8s_start "$name" "$K8S_TMP/$name.log" env KUBERNETES_SERVICE_HOST=127.0.0.1 \
    KUBERNETES_SERVICE_PORT="$api_port" "$bin" --service-account-dir "$K8S_TMP/sa" \
    --metrics-port "$port" --metrics-bind-address 127.0.0.1 \
    --runtime-image registry.invalid/tlt:test "$@"
  pid=$K8S_LAST_PID
  if [[ $name == operator ]]; then OP_PID=$pid; fi
  K8S_STEP="tlt-operator $name did not report ready on /readyz within 30 s"
  k8s_wait_for 30 "$pid" curl -sf "http://127.0.0.1:$port/readyz"
}

# k8s_start NAME LOG CMD...: starts CMD in the background, remembered for k8s_stop_all.
k8s_start() {
  local name=$1 log=$2
  shift 2
  "$@" >"$log" 2>&1 </dev/null 8>&- 9>&- &
  K8S_PIDS+=("$!")
  K8S_NAMES[$!]=$name
  K8S_LAST_PID=$!
}

# kubectl against the test apiserver, with its discovery cache in the temp dir (not ~/.kube).
kc() { "$K8S_BIN/kubectl" --kubeconfig "$KUBECONFIG" --cache-dir "$K8S_TMP/kube-cache" "$@"; }

# A job's status and children as the operator wrote them; the namespace defaults to research
# (k8s_install_operator's). A test may define its own versions after sourcing this file.
phase() { kc get "$1" -n "${2:-research}" -o 'jsonpath={.status.phase}'; }
phase_is() { [[ $(phase "$1" "${3:-research}") == "$2" ]]; }
cond() {  # OBJECT TYPE FIELD [NAMESPACE]
  kc get "$1" -n "${4:-research}" -o "jsonpath={.status.conditions[?(@.type==\"$2\")].$3}"
}
events() {  # NAME REASON [NAMESPACE] -> "Type: message" of the Events about NAME with REASON
  kc get events -n "${3:-research}" --field-selector "involvedObject.name=$1,reason=$2" \
    -o 'jsonpath={range .items[*]}{.type}: {.message}{"\n"}{end}'
}
has_event() { [[ -n $(events "$@") ]]; }
owned() {  # NAME [NAMESPACE] -> pods, services and configmaps labelled tlt.dev/job=NAME
  kc get pods,services,configmaps -n "${2:-research}" -l "tlt.dev/job=$1" -o name
}

# k8s_client_ca PREFIX: a throwaway CA for client certificates, PREFIX.crt and PREFIX.key.
k8s_client_ca() {
  K8S_STEP="make a client CA with openssl"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj "/CN=tlt-test-client-ca" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -keyout "$1.key" -out "$1.crt" 2>/dev/null
}

# k8s_client_cert CA_PREFIX PREFIX USER [GROUP]: PREFIX.crt and PREFIX.key, a client certificate
# for USER (CN) in GROUP (O) signed by the CA of k8s_client_ca CA_PREFIX.
k8s_client_cert() {
  local subj="/CN=$3" serial
  [[ -n ${4:-} ]] && subj="/O=$4$subj"
  serial=0x$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
  K8S_STEP="make a client certificate for $3 with openssl"
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "$subj" \
    -keyout "$2.key" -out "$2.csr" 2>/dev/null &&
    printf 'keyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n' >"$2.ext" &&
    openssl x509 -req -in "$2.csr" -CA "$1.crt" -CAkey "$1.key" -set_serial "$serial" \
      -days 2 -extfile "$2.ext" -out "$2.crt" 2>/dev/null
}

k8s_start_control_plane() {
  local etcd_client etcd_peer api_port
  K8S_STEP="start etcd"
  k8s_free_port etcd_client && k8s_free_port etcd_peer || return 1
  k8s_start etcd "$K8S_TMP/etcd.log" "$K8S_BIN/etcd" --name test --data-dir "$K8S_TMP/etcd" \
    --listen-client-urls "http://127.0.0.1:$etcd_client" \
    --advertise-client-urls "http://127.0.0.1:$etcd_client" \
    --listen-peer-urls "http://127.0.0.1:$etcd_peer" \
    --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
    --initial-cluster "test=http://127.0.0.1:$etcd_peer" --log-level warn
  local etcd_pid=$K8S_LAST_PID
  K8S_STEP="etcd did not listen on 127.0.0.1:$etcd_client within 30 s"
  k8s_wait_for 30 "$etcd_pid" bash -c "exec 3<>/dev/tcp/127.0.0.1/$etcd_client" || return 1

  K8S_STEP="prepare kube-apiserver credentials"
  K8S_TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
  printf '%s,test-admin,test-admin-uid,"system:masters"\n' "$K8S_TOKEN" >"$K8S_TMP/tokens.csv"
  openssl genrsa -out "$K8S_TMP/sa.key" 2048 2>/dev/null
  openssl rsa -in "$K8S_TMP/sa.key" -pubout -out "$K8S_TMP/sa.pub" 2>/dev/null
  k8s_client_ca "$K8S_TMP/client-ca" || return 1
  # shellcheck disable=SC2034  # for the caller
  K8S_CLIENT_CA="$K8S_TMP/client-ca.crt" K8S_CLIENT_CA_KEY="$K8S_TMP/client-ca.key"
  k8s_client_cert "$K8S_TMP/client-ca" "$K8S_TMP/client" tlt-cert-user system:masters || return 1
  # shellcheck disable=SC2034  # for the caller
  K8S_CLIENT_CERT="$K8S_TMP/client.crt" K8S_CLIENT_KEY="$K8S_TMP/client.key"
  k8s_free_port api_port || return 1
  K8S_SERVER="https://127.0.0.1:$api_port"
  K8S_STEP="start kube-apiserver"
  k8s_start kube-apiserver "$K8S_TMP/kube-apiserver.log" "$K8S_BIN/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$etcd_client" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
    --cert-dir "$K8S_TMP/certs" \
    --token-auth-file "$K8S_TMP/tokens.csv" --client-ca-file "$K8S_CLIENT_CA" \
    --authorization-mode RBAC \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$K8S_TMP/sa.pub" \
    --service-account-signing-key-file "$K8S_TMP/sa.key" \
    --service-cluster-ip-range 10.0.0.0/24 --allow-privileged=true
  local api_pid=$K8S_LAST_PID
  K8S_STEP="kube-apiserver did not write its serving certificate within 60 s"
  K8S_CA="$K8S_TMP/certs/apiserver.crt"
  k8s_wait_for 60 "$api_pid" test -s "$K8S_CA" || return 1
  "$K8S_BIN/kubectl" config --kubeconfig "$KUBECONFIG" set-cluster test --server "$K8S_SERVER" \
    --certificate-authority "$K8S_CA" --embed-certs=true >/dev/null
  "$K8S_BIN/kubectl" config --kubeconfig "$KUBECONFIG" set-credentials test-admin \
    --token "$K8S_TOKEN" >/dev/null
  "$K8S_BIN/kubectl" config --kubeconfig "$KUBECONFIG" set-context test --cluster test \
    --user test-admin >/dev/null
  "$K8S_BIN/kubectl" config --kubeconfig "$KUBECONFIG" use-context test >/dev/null
  K8S_STEP="kube-apiserver did not report ready on $K8S_SERVER/readyz within 90 s"
  k8s_wait_for 90 "$api_pid" kc get --raw /readyz || return 1
  k8s_say "kube-apiserver ready on $K8S_SERVER (etcd on 127.0.0.1:$etcd_client)"
}

# k8s_start_kwok: kwok with the shared stages (scripts/kwok-stages.yaml: nodes turn Ready,
# bound pods Running, deleted pods go) managing nodes annotated kwok.x-k8s.io/node=fake.
# Sets KWOK_PID. Call after k8s_start_control_plane.
k8s_start_kwok() {
  k8s_start kwok "$K8S_TMP/kwok.log" "$K8S_BIN/kwok" --config "$K8S_SRC/scripts/kwok-stages.yaml" \
    --kubeconfig "$KUBECONFIG" --manage-all-nodes=false \
    --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake --node-ip 127.0.0.1
  KWOK_PID=$K8S_LAST_PID
}

# k8s_kwok_nodes COUNT GPUS: the YAML of COUNT kwok nodes bench-node-0.. (110 pods, GPUS
# nvidia.com/gpu each, label nvidia.com/gpu.product), for kc apply -f.
k8s_kwok_nodes() {
  local k
  for ((k = 0; k < $1; k++)); do
    cat <<EOF
apiVersion: v1
kind: Node
metadata:
  name: bench-node-$k
  annotations: {kwok.x-k8s.io/node: fake}
  labels: {type: kwok, nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
status:
  capacity: {cpu: "1024", memory: 16Ti, pods: "110", nvidia.com/gpu: "$2"}
  allocatable: {cpu: "1024", memory: 16Ti, pods: "110", nvidia.com/gpu: "$2"}
---
EOF
  done
}

# k8s_start_gpu_node: one kwok node gpu-node-0 (32 nvidia.com/gpu, label nvidia.com/gpu.product),
# waited Ready, and the stand-in scheduler (scripts/k8s-binder.sh) binding pods to it; starts
# kwok first (k8s_start_kwok) unless it runs.
k8s_start_gpu_node() {
  if [[ -z ${KWOK_PID:-} ]]; then
    K8S_STEP="start kwok"
    k8s_start_kwok
  fi
  K8S_STEP="create the fake GPU node"
  kc apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: Node
metadata:
  name: gpu-node-0
  annotations: {kwok.x-k8s.io/node: fake}
  labels: {type: kwok, nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
status:
  capacity: {cpu: "256", memory: 2Ti, pods: "110", nvidia.com/gpu: "32"}
  allocatable: {cpu: "256", memory: 2Ti, pods: "110", nvidia.com/gpu: "32"}
YAML
  k8s_gpu_node_ready() {
    [[ $(kc get node gpu-node-0 -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}') == True ]]
  }
  K8S_STEP="the fake node did not become Ready within 60 s"
  k8s_wait_for 60 "$KWOK_PID" k8s_gpu_node_ready || return 1
  k8s_start binder "$K8S_TMP/binder.log" "$K8S_SRC/scripts/k8s-binder.sh" \
    "$K8S_BIN/kubectl" "$KUBECONFIG" "$K8S_TMP/kube-cache-binder" gpu-node-0
}

# k8s_start_kube_controllers: kube-controller-manager (the deployment, replicaset and
# nodelifecycle controllers only -- the last lifts the node.kubernetes.io/not-ready taint that the
# apiserver puts on every new node, once kwok reports it Ready --, no leader election, no serving
# port) and kube-scheduler (no leader election, no serving
# port), both as the test's system:masters user, so that a Deployment gets ReplicaSets and pods
# and the pods get bound to nodes (kwok's, with k8s_start_kwok). Both are built by
# scripts/k8s-tools.sh. Fails when either exits within its first 2 s.
k8s_start_kube_controllers() {
  local n
  for n in kube-controller-manager kube-scheduler; do
    [[ -x "$K8S_BIN/$n" ]] || {
      K8S_STEP="$K8S_BIN/$n missing (run scripts/k8s-tools.sh)"
      return 1
    }
  done
  K8S_STEP="start kube-controller-manager"
  k8s_start kube-controller-manager "$K8S_TMP/kube-controller-manager.log" \
    "$K8S_BIN/kube-controller-manager" --kubeconfig "$KUBECONFIG" \
    --controllers deployment,replicaset,nodelifecycle --leader-elect=false --secure-port 0
  KCM_PID=$K8S_LAST_PID
  K8S_STEP="start kube-scheduler"
  k8s_start kube-scheduler "$K8S_TMP/kube-scheduler.log" "$K8S_BIN/kube-scheduler" \
    --kubeconfig "$KUBECONFIG" --leader-elect=false --secure-port 0
  SCHED_PID=$K8S_LAST_PID
  sleep 2
  for n in "$KCM_PID" "$SCHED_PID"; do
    kill -0 "$n" 2>/dev/null || {
      K8S_STEP="${K8S_NAMES[$n]} exited at start (see its log)"
      return 1
    }
  done
}

# ---- the test layer: what every test script on this control plane starts and ends with ----------

# k8s_env_begin NAME [TOOL...]: the start of a script on this control plane: the traps (EXIT:
# k8s_env_exit_trap; INT, TERM: exit 130, K8S_STEP "interrupted by a signal"), k8s_env_init NAME,
# k8s_need TOOL..., k8s_start_control_plane; on any failure the script exits 1 with K8S_STEP
# saying what failed. The verdict is the caller's: set K8S_ON_EXIT first (or k8s_test_begin).
# TOOL kueue also asks scripts/k8s-tools.sh to build Kueue when it is not cached.
k8s_env_begin() {
  local name=$1 t optional=()
  shift
  exec 8>&1 9>&2  # k8s_env_init does it too; the traps need them already
  trap 'k8s_env_exit_trap' EXIT
  trap 'K8S_STEP="interrupted by a signal"; exit 130' INT TERM
  for t in "$@"; do [[ $t != kueue ]] || optional+=(kueue); done
  k8s_env_init "$name" "${optional[@]}" || exit 1
  k8s_need "$@" || exit 1
  k8s_start_control_plane || exit 1
}

# k8s_test_begin NAME [TOOL...]: k8s_env_begin for a test whose verdict, the last line it prints,
# is "PASS: NAME: <k8s_test_finish's words> (N s)" or "FAIL: NAME: $K8S_STEP". A script that
# exits 0 without k8s_test_finish fails ("ended before k8s_test_finish").
k8s_test_begin() {
  K8S_TEST=$1
  K8S_TEST_T0=$SECONDS
  K8S_TEST_RESULT=
  K8S_ON_EXIT=k8s_test_verdict
  k8s_env_begin "$@"
}

# k8s_test_finish WORDS...: the end of a passing test: exits 0 (the exit trap stops everything
# and prints PASS: NAME: WORDS (N s)).
k8s_test_finish() {
  K8S_TEST_RESULT="$*"
  K8S_STEP="stop everything"
  exit 0
}

# k8s_test_verdict RC: K8S_ON_EXIT of k8s_test_begin: prints the PASS or FAIL line; returns 1
# (the script fails) when RC is 0 but k8s_test_finish was not reached.
k8s_test_verdict() {
  if [[ $1 -eq 0 && -n $K8S_TEST_RESULT ]]; then
    echo "PASS: $K8S_TEST: $K8S_TEST_RESULT ($((SECONDS - K8S_TEST_T0)) s)"
    return 0
  fi
  [[ $1 -ne 0 ]] || K8S_STEP+=" (the script ended before k8s_test_finish)"
  echo "FAIL: $K8S_TEST: $K8S_STEP"
  return 1
}

# k8s_test_operator BINARY [FLAGS...]: a running tlt-operator for the test: k8s_install_operator
# unless done, then k8s_start_operator BINARY on a free METRICS_PORT with FLAGS; fails the test
# (fail) when it is not ready. Sets METRICS_PORT, OP_PID and K8S_WATCH_PID (so that wait_until
# fails as soon as the operator exits). Again after stopping OP_PID: a new operator, a new port.
k8s_test_operator() {
  [[ -n ${K8S_INSTALLED:-} ]] || k8s_install_operator
  k8s_free_port METRICS_PORT
  k8s_start_operator "$1" "$METRICS_PORT" "${@:2}" || fail "$K8S_STEP"
  K8S_WATCH_PID=$OP_PID
}

# fail MESSAGE: k8s_fail MESSAGE with the logs named in K8S_FAIL_LOGS (default: operator
# prometheus kwok): K8S_STEP=MESSAGE, exit 1. A script may define its own after k8s_test_begin.
fail() {
  # shellcheck disable=SC2086
  k8s_fail "$1" ${K8S_FAIL_LOGS:-}
}
# wait_until SECONDS WHAT CMD...: k8s_wait_until (every 0.2 s; fail WHAT when the time is over or
# K8S_WATCH_PID has exited).
wait_until() { k8s_wait_until "$@"; }

# count_pods JOB [NAMESPACE]: how many pods are labelled tlt.dev/job=JOB (those being deleted
# too); has_pods JOB N [NAMESPACE]: exactly N. The namespace defaults to research.
count_pods() { kc get pods -n "${2:-research}" -l "tlt.dev/job=$1" -o name | wc -l; }
has_pods() { [[ $(count_pods "$1" "${3:-research}") -eq $2 ]]; }
