#!/usr/bin/env bash
# Smoke test of the Kubernetes test binaries from scripts/k8s-tools.sh: starts etcd, a
# kube-apiserver (token auth, RBAC, service-account keys, self-signed serving cert) and kwok, all
# on 127.0.0.1 in a temp dir; checks /readyz, the API resources, and that a fake Node managed by
# kwok becomes Ready, a Pod bound to it Running, and that the Pod goes away when deleted; installs
# and uninstalls a tiny chart with helm; checks that every listener is on 127.0.0.1; then stops
# everything it started, by PID, also on failure or Ctrl-C.
#
# Usage: scripts/k8s-smoke.sh           # builds the binaries first if they are not cached yet
#        K8S_BIN=DIR scripts/k8s-smoke.sh   # use the binaries in DIR instead
#        KEEP=1 scripts/k8s-smoke.sh        # keep the temp dir (logs, certs) afterwards
# Prints one line starting with PASS or FAIL last; exits 0 only on PASS.
# Needs: openssl (the service-account key), bash's /dev/tcp (free ports).
set -euo pipefail

say() { printf 'k8s-smoke: %s\n' "$*"; }
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

if [[ -n ${K8S_BIN:-} ]]; then
  BIN=$K8S_BIN
elif ! BIN=$("$HERE/k8s-tools.sh" | tail -1); then
  echo "FAIL: k8s smoke: scripts/k8s-tools.sh could not provide the binaries (see above)"
  exit 1
fi
for n in etcd kube-apiserver kubectl kwok; do
  [[ -x "$BIN/$n" ]] || { echo "FAIL: k8s smoke: $BIN/$n missing (run scripts/k8s-tools.sh)"; exit 1; }
done
command -v openssl >/dev/null 2>&1 || { echo "FAIL: k8s smoke: openssl is not installed"; exit 1; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/tlt-k8s-smoke.XXXXXX")
export KUBECONFIG="$TMP/kubeconfig"   # written below; keeps the caller's kubeconfig out of this
PIDS=()        # every process this script started, in start order
declare -A NAMES=()   # PID -> name, for messages
STEP="setup"   # what was being done, for the FAIL line

# Stop what was started, newest first: TERM, up to 10 s grace, then KILL; then wait on each so
# that none is left behind as a zombie or an orphan.
stop_all() {
  local i pid n
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    pid=${PIDS[i]}
    say "stopping ${NAMES[$pid]} (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || continue
    for ((n = 0; n < 100; n++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  PIDS=()
}

# The script's own stdout and stderr, kept on fds 8 and 9: a signal can arrive while a command
# with its output sent to /dev/null is running, and the exit trap then runs with that redirection.
exec 8>&1 9>&2

finish() {
  local rc=$?
  trap - EXIT INT TERM
  exec 1>&8 2>&9
  stop_all
  if [[ $rc -ne 0 ]]; then
    for f in etcd kube-apiserver kwok; do
      [[ -s "$TMP/$f.log" ]] || continue
      say "last lines of $f.log:"
      tail -n 15 "$TMP/$f.log" | sed 's/^/    /'
    done
  fi
  if [[ -n ${KEEP:-} ]]; then say "kept $TMP"; else rm -rf "$TMP"; fi
  if [[ $rc -eq 0 ]]; then
    echo "PASS: k8s smoke: etcd, kube-apiserver, kubectl, kwok${HELM_OK:+ and helm} work on 127.0.0.1 ($BIN)"
  else
    echo "FAIL: k8s smoke: $STEP"
  fi
  exit "$rc"
}
trap finish EXIT
trap 'STEP="interrupted by a signal"; exit 130' INT TERM

# free_port VAR: set VAR to a port on 127.0.0.1 that nothing listens on and that this script has
# not handed out yet (so not called in a subshell: TAKEN must remember).
TAKEN=" "
free_port() {
  local p tries
  for ((tries = 0; tries < 200; tries++)); do
    p=$((20000 + RANDOM % 10000))
    [[ $TAKEN == *" $p "* ]] && continue
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      TAKEN+="$p "
      printf -v "$1" '%s' "$p"
      return 0
    fi
  done
  return 1
}

# wait_for SECONDS PID CMD...: retry CMD every half second until it succeeds; give up when the
# time is over or process PID has died.
wait_for() {
  local deadline=$((SECONDS + $1)) pid=$2
  shift 2
  until "$@" >/dev/null 2>&1; do
    if ! kill -0 "$pid" 2>/dev/null; then
      STEP+=" (${NAMES[$pid]:-pid $pid} exited early; its log is above)"
      return 1
    fi
    ((SECONDS < deadline)) || return 1
    sleep 0.5
  done
}

# ---- etcd ----------------------------------------------------------------------------------------
STEP="start etcd"
free_port ETCD_CLIENT
free_port ETCD_PEER
say "starting etcd on 127.0.0.1:$ETCD_CLIENT (peer $ETCD_PEER)"
"$BIN/etcd" --name smoke --data-dir "$TMP/etcd" \
  --listen-client-urls "http://127.0.0.1:$ETCD_CLIENT" --advertise-client-urls "http://127.0.0.1:$ETCD_CLIENT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER" \
  --initial-cluster "smoke=http://127.0.0.1:$ETCD_PEER" --log-level warn >"$TMP/etcd.log" 2>&1 </dev/null 8>&- 9>&- &
ETCD_PID=$!
PIDS+=("$ETCD_PID")
NAMES[$ETCD_PID]=etcd
etcd_up() { (exec 3<>"/dev/tcp/127.0.0.1/$ETCD_CLIENT"); }
STEP="etcd did not listen on 127.0.0.1:$ETCD_CLIENT within 30 s"
wait_for 30 "$ETCD_PID" etcd_up

# ---- kube-apiserver --------------------------------------------------------------------------------
STEP="prepare kube-apiserver credentials"
TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
printf '%s,smoke-admin,smoke-admin-uid,"system:masters"\n' "$TOKEN" >"$TMP/tokens.csv"
openssl genrsa -out "$TMP/sa.key" 2048 2>/dev/null
openssl rsa -in "$TMP/sa.key" -pubout -out "$TMP/sa.pub" 2>/dev/null
free_port API_PORT
SERVER="https://127.0.0.1:$API_PORT"
STEP="start kube-apiserver"
say "starting kube-apiserver on $SERVER"
"$BIN/kube-apiserver" \
  --etcd-servers "http://127.0.0.1:$ETCD_CLIENT" \
  --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" \
  --cert-dir "$TMP/certs" \
  --token-auth-file "$TMP/tokens.csv" --authorization-mode RBAC \
  --service-account-issuer https://kubernetes.default.svc.cluster.local \
  --service-account-key-file "$TMP/sa.pub" --service-account-signing-key-file "$TMP/sa.key" \
  --service-cluster-ip-range 10.0.0.0/24 --allow-privileged=true \
  >"$TMP/kube-apiserver.log" 2>&1 </dev/null 8>&- 9>&- &
API_PID=$!
PIDS+=("$API_PID")
NAMES[$API_PID]=kube-apiserver

k() { "$BIN/kubectl" --server "$SERVER" --token "$TOKEN" --insecure-skip-tls-verify "$@"; }
STEP="kube-apiserver did not report ready on $SERVER/readyz within 90 s"
wait_for 90 "$API_PID" k get --raw /readyz
say "kubectl get --raw /readyz: $(k get --raw /readyz)"
STEP="kubectl api-resources"
k api-resources >"$TMP/api-resources.txt"
say "kubectl api-resources | head:"
head -n 10 "$TMP/api-resources.txt"
grep -q '^nodes ' "$TMP/api-resources.txt"
say "server version: $(k version -o yaml | awk '$1 == "gitVersion:" { v = $2 } END { print v }')"

# ---- kwok --------------------------------------------------------------------------------------------
STEP="start kwok"
KUBECONFIG_FILE=$KUBECONFIG
"$BIN/kubectl" config --kubeconfig "$KUBECONFIG_FILE" set-cluster smoke --server "$SERVER" \
  --insecure-skip-tls-verify=true >/dev/null
"$BIN/kubectl" config --kubeconfig "$KUBECONFIG_FILE" set-credentials smoke-admin --token "$TOKEN" >/dev/null
"$BIN/kubectl" config --kubeconfig "$KUBECONFIG_FILE" set-context smoke --cluster smoke --user smoke-admin >/dev/null
"$BIN/kubectl" config --kubeconfig "$KUBECONFIG_FILE" use-context smoke >/dev/null
# kwok only acts through Stages (selector on the object -> status patch or delete), and the kwok
# binary ships none, so this configuration brings a minimal set: a node becomes Ready and then
# heartbeats; a pod bound to a managed node becomes Running; a deleted pod is removed (no
# kubelet would ever finish its deletion). Passing --config also keeps ~/.kwok/kwok.yaml out.
# (No KwokConfiguration document: with none, kwok uses its defaulted one.)
cat >"$TMP/kwok.yaml" <<'EOF'
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: node-ready}
spec:
  resourceRef: {apiGroup: v1, kind: Node}
  selector:
    matchExpressions:
    - {key: '.status.conditions.[] | select( .type == "Ready" ) | .status', operator: NotIn, values: ["True"]}
  next:
    statusTemplate: |
      {{ $now := Now }}
      phase: Running
      conditions:
      {{ range NodeConditions }}
      - type: {{ .type | Quote }}
        status: {{ .status | Quote }}
        reason: {{ .reason | Quote }}
        message: {{ .message | Quote }}
        lastHeartbeatTime: {{ $now | Quote }}
        lastTransitionTime: {{ $now | Quote }}
      {{ end }}
      addresses:
      - {type: InternalIP, address: {{ NodeIP | Quote }}}
      - {type: Hostname, address: {{ .metadata.name | Quote }}}
      nodeInfo:
        architecture: amd64
        operatingSystem: linux
        osImage: kwok
        kernelVersion: {{ printf "kwok-%s" Version | Quote }}
        kubeletVersion: {{ printf "kwok-%s" Version | Quote }}
        containerRuntimeVersion: {{ printf "kwok-%s" Version | Quote }}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: node-heartbeat}
spec:
  resourceRef: {apiGroup: v1, kind: Node}
  selector:
    matchExpressions:
    - {key: '.status.conditions.[] | select( .type == "Ready" ) | .status', operator: In, values: ["True"]}
  delay: {durationMilliseconds: 20000, jitterDurationMilliseconds: 5000}
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      {{ range .status.conditions }}
      - type: {{ .type | Quote }}
        lastHeartbeatTime: {{ $now | Quote }}
      {{ end }}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: pod-running}
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: .metadata.deletionTimestamp, operator: DoesNotExist}
    - {key: .status.phase, operator: In, values: [Pending]}
  next:
    statusTemplate: |
      {{ $now := Now }}
      phase: Running
      startTime: {{ $now | Quote }}
      hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
      podIP: {{ PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) | Quote }}
      conditions:
      {{ range list "PodScheduled" "Initialized" "ContainersReady" "Ready" }}
      - {type: {{ . }}, status: "True", lastTransitionTime: {{ $now | Quote }}}
      {{ end }}
      containerStatuses:
      {{ range .spec.containers }}
      - name: {{ .name | Quote }}
        image: {{ .image | Quote }}
        ready: true
        started: true
        restartCount: 0
        state: {running: {startedAt: {{ $now | Quote }}}}
      {{ end }}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: pod-delete}
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: .metadata.deletionTimestamp, operator: Exists}
  next:
    delete: true
EOF
say "starting kwok (manages nodes annotated kwok.x-k8s.io/node=fake)"
"$BIN/kwok" --config "$TMP/kwok.yaml" --kubeconfig "$KUBECONFIG_FILE" \
  --manage-all-nodes=false --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
  --node-ip 127.0.0.1 >"$TMP/kwok.log" 2>&1 </dev/null 8>&- 9>&- &
KWOK_PID=$!
PIDS+=("$KWOK_PID")
NAMES[$KWOK_PID]=kwok

STEP="create the fake node"
kc() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_FILE" "$@"; }
kc apply -f - >/dev/null <<'EOF'
apiVersion: v1
kind: Node
metadata:
  name: smoke-gpu-0
  annotations:
    kwok.x-k8s.io/node: fake
  labels:
    type: kwok
spec:
  taints:
  - key: kwok.x-k8s.io/node
    value: fake
    effect: NoSchedule
status:
  capacity: {cpu: "32", memory: 256Gi, pods: "110", nvidia.com/gpu: "8"}
  allocatable: {cpu: "32", memory: 256Gi, pods: "110", nvidia.com/gpu: "8"}
EOF
STEP="the fake node did not become Ready within 60 s"
node_ready() { [[ $(kc get node smoke-gpu-0 -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}') == True ]]; }
wait_for 60 "$KWOK_PID" node_ready
say "node smoke-gpu-0 is Ready:"
kc get node smoke-gpu-0 -o wide

# A pod bound to the node directly (no scheduler runs here). No controller-manager runs either,
# so the namespace's default ServiceAccount is created by hand.
STEP="create a pod on the fake node"
kc create serviceaccount default --namespace default >/dev/null 2>&1 || true
kc apply -f - >/dev/null <<'EOF'
apiVersion: v1
kind: Pod
metadata:
  name: smoke-pod
  namespace: default
spec:
  nodeName: smoke-gpu-0
  automountServiceAccountToken: false
  tolerations:
  - key: kwok.x-k8s.io/node
    operator: Exists
    effect: NoSchedule
  containers:
  - name: c
    image: example.invalid/none:0
    resources:
      limits: {nvidia.com/gpu: "1"}
EOF
STEP="the pod on the fake node did not become Running within 60 s"
pod_running() { [[ $(kc get pod smoke-pod -o 'jsonpath={.status.phase}') == Running ]]; }
wait_for 60 "$KWOK_PID" pod_running
say "pod smoke-pod is Running:"
kc get pod smoke-pod -o wide
STEP="the deleted pod was not removed within 60 s"
kc delete pod smoke-pod --wait=true --timeout=60s >/dev/null
say "pod smoke-pod deleted"

# helm: install and uninstall a one-ConfigMap chart made here.
if [[ -x "$BIN/helm" ]]; then
  STEP="helm install of a one-ConfigMap chart"
  mkdir -p "$TMP/chart/templates"
  printf 'apiVersion: v2\nname: smoke\nversion: 0.1.0\n' >"$TMP/chart/Chart.yaml"
  printf 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cm\ndata:\n  kube: {{ .Capabilities.KubeVersion.Version | quote }}\n' \
    >"$TMP/chart/templates/cm.yaml"
  export HELM_CACHE_HOME="$TMP/helm/cache" HELM_CONFIG_HOME="$TMP/helm/config" HELM_DATA_HOME="$TMP/helm/data"
  "$BIN/helm" --kubeconfig "$KUBECONFIG_FILE" install smoke "$TMP/chart" --namespace default >/dev/null
  say "helm installed release smoke; its ConfigMap says kube=$(kc get configmap smoke-cm -o 'jsonpath={.data.kube}')"
  "$BIN/helm" --kubeconfig "$KUBECONFIG_FILE" uninstall smoke --namespace default >/dev/null
  say "helm uninstalled release smoke"
  HELM_OK=1
fi

# Every TCP listener of the processes started here must be on 127.0.0.1.
STEP="a process listens beyond 127.0.0.1"
if command -v ss >/dev/null 2>&1; then
  listeners=$(ss -Htlnp)
  for pid in "${PIDS[@]}"; do
    addrs=$(awk -v p="pid=$pid," 'index($0, p) { print $4 }' <<<"$listeners" | sort -u | paste -sd' ')
    say "${NAMES[$pid]} listens on: ${addrs:-nothing}"
    for a in $addrs; do [[ $a == 127.0.0.1:* ]] || { STEP+=": ${NAMES[$pid]} on $a"; exit 1; }; done
  done
else
  say "ss is not installed: listener addresses not checked"
fi

STEP="stop everything"
