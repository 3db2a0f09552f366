# shellcheck shell=bash
# A real Kueue (sigs.k8s.io/kueue, built by `scripts/k8s-tools.sh kueue`) on the throwaway control
# plane of scripts/k8s-env.sh, to be sourced after it:
#   source "$src/scripts/k8s-env.sh"; source "$src/scripts/k8s-kueue.sh"
#   k8s_test_begin my_test kueue                 # "kueue": k8s-tools.sh builds it when missing
#   k8s_kueue_start [--wait-for-pods-ready 30s] [--requeue-backoff 1]
#   k8s_kueue_nodes 2 8                          # kwok nodes with 8 nvidia.com/gpu, kube-scheduler
#   k8s_kueue_queue research team-a 8            # ResourceFlavor gpu, ClusterQueue + LocalQueue
#
# How it runs (docs/kueue.md says why each piece is so):
#  - the manager runs outside the cluster with the test's system:masters kubeconfig;
#  - its webhooks (defaulting/validation of Kueue's kinds and of the job kinds, and CRD
#    conversion at /convert) are served on 127.0.0.1 with a certificate made here by openssl;
#    Kueue's internal cert management is off (it can only issue certificates for a Service's DNS
#    name) and the webhook configurations and CRD conversion point at the URL
#    (scripts/kueue-manifests.py rewrites Kueue's own manifests);
#  - with its cert management off, Kueue v0.17 reads its metrics certificate from the fixed path
#    /etc/kueue/metrics/certs: the manager runs in its own mount namespace (unshare) where this
#    test's certificate directory is bind-mounted there; the empty directory is created once
#    (root) as the mount point;
#  - the visibility API server (an aggregated API, feature VisibilityOnDemand) is off.
# Needs: openssl, python3 with PyYAML, unshare and mount (util-linux); root, or unprivileged user
# namespaces and an existing /etc/kueue/metrics/certs.

KUEUE_NAMESPACE=kueue-system
# The flavour that k8s_kueue_queue quotes GPUs in: nodes labelled as k8s_kueue_nodes' are.
KUEUE_FLAVOR=gpu
KUEUE_GPU_PRODUCT=NVIDIA-H100-80GB-HBM3
KUEUE_METRICS_CERTS=/etc/kueue/metrics/certs

# k8s_kueue_serving_cert DIR: DIR/ca.crt (a throwaway CA) and DIR/tls.crt, DIR/tls.key (a server
# certificate for IP 127.0.0.1 signed by it; the file names controller-runtime's webhook server
# reads).
k8s_kueue_serving_cert() {
  local d=$1 serial
  serial=0x$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
  K8S_STEP="make Kueue's webhook certificate with openssl"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj "/CN=tlt-test-kueue-ca" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -keyout "$d/ca.key" -out "$d/ca.crt" 2>/dev/null &&
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=127.0.0.1" \
      -keyout "$d/tls.key" -out "$d/tls.csr" 2>/dev/null &&
    printf '%s\n' "subjectAltName=IP:127.0.0.1" "keyUsage=critical,digitalSignature" \
      "extendedKeyUsage=serverAuth" >"$d/tls.ext" &&
    openssl x509 -req -in "$d/tls.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -set_serial "$serial" \
      -days 2 -extfile "$d/tls.ext" -out "$d/tls.crt" 2>/dev/null
}

# k8s_kueue_config FILE WEBHOOK_PORT HEALTH_PORT METRICS_PORT CERT_DIR PODS_READY BACKOFF: Kueue's
# Configuration (config.kueue.x-k8s.io/v1beta2). PODS_READY empty: no waitForPodsReady; BACKOFF
# empty: Kueue's default requeuing backoff (60 s base).
k8s_kueue_config() {
  local file=$1 wh=$2 hp=$3 mp=$4 certs=$5 ready=$6 backoff=$7
  cat >"$file" <<EOF
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: $KUEUE_NAMESPACE
health:
  healthProbeBindAddress: 127.0.0.1:$hp
metrics:
  bindAddress: 127.0.0.1:$mp
webhook:
  host: 127.0.0.1
  port: $wh
  certDir: $certs
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
manageJobsWithoutQueueName: false
featureGates:
  VisibilityOnDemand: false
integrations:
  frameworks: ["batch/job"]
  externalFrameworks: ["RLJob.v1alpha1.tlt.dev", "TSTPretrainJob.v1alpha1.tlt.dev"]
EOF
  [[ -z $ready ]] && return 0
  cat >>"$file" <<EOF
waitForPodsReady:
  timeout: $ready
  blockAdmission: false
  requeuingStrategy:
    timestamp: Eviction
EOF
  [[ -z $backoff ]] || printf '    backoffBaseSeconds: %s\n' "$backoff" >>"$file"
}

# k8s_kueue_mount_point: the directory Kueue's metrics certificate is bind-mounted on exists
# (created when root); else K8S_STEP says what to do and returns 1.
k8s_kueue_mount_point() {
  [[ -d $KUEUE_METRICS_CERTS ]] && return 0
  if [[ $(id -u) -eq 0 ]] && mkdir -p "$KUEUE_METRICS_CERTS"; then return 0; fi
  K8S_STEP="$KUEUE_METRICS_CERTS does not exist: create it once as root (an empty directory:"
  K8S_STEP+=" Kueue reads its metrics certificate there; each test bind-mounts its own)"
  return 1
}

# k8s_kueue_start [--wait-for-pods-ready DURATION] [--requeue-backoff SECONDS]: installs Kueue's
# CRDs and webhook configurations (pointing at 127.0.0.1), namespace kueue-system, writes the
# Configuration (waitForPodsReady with timeout DURATION and, given SECONDS, that base of its
# requeuing backoff, when asked) and starts the manager (log kueue.log); returns when it is
# ready and its webhooks
# answer (a server-side dry run of a ResourceFlavor passes them). Sets KUEUE_PID and
# KUEUE_WEBHOOK_PORT. On failure returns 1 with K8S_STEP saying what failed.
k8s_kueue_start() {
  local ready="" backoff="" dir="$K8S_TMP/kueue" m="$K8S_BIN/kueue-manifests" wh hp mp ns
  while (($#)); do
    case $1 in
      --wait-for-pods-ready) ready=$2 ;;
      --requeue-backoff) backoff=$2 ;;
      *) K8S_STEP="k8s_kueue_start: unknown option $1"; return 1 ;;
    esac
    shift 2
  done
  k8s_need kueue openssl python3 unshare curl || return 1
  [[ -f $m/.version ]] || { K8S_STEP="$m missing (run scripts/k8s-tools.sh kueue)"; return 1; }
  k8s_kueue_mount_point || return 1
  mkdir -p "$dir/certs"
  k8s_kueue_serving_cert "$dir/certs" || return 1
  k8s_free_port wh && k8s_free_port hp && k8s_free_port mp || return 1

  K8S_STEP="render Kueue's manifests for https://127.0.0.1:$wh (scripts/kueue-manifests.py)"
  python3 "$K8S_SRC/scripts/kueue-manifests.py" "$m" "https://127.0.0.1:$wh" "$dir/certs/ca.crt" \
    >"$dir/manifests.yaml" || return 1
  K8S_STEP="install Kueue's CRDs and webhook configurations"
  # Server-side: the Workload CRD is larger than client-side apply's annotation limit.
  kc apply --server-side -f "$dir/manifests.yaml" >/dev/null || return 1
  K8S_STEP="Kueue's CRDs did not become Established within 60 s"
  k8s_wait_for 60 "$(k8s_kueue_pid_of kube-apiserver)" k8s_kueue_crds_established \
    "$(grep -c '^kind: CustomResourceDefinition' "$dir/manifests.yaml")" || return 1
  kc get namespace "$KUEUE_NAMESPACE" >/dev/null 2>&1 ||
    kc create namespace "$KUEUE_NAMESPACE" >/dev/null || return 1
  k8s_kueue_config "$dir/config.yaml" "$wh" "$hp" "$mp" "$dir/certs" "$ready" "$backoff"

  K8S_STEP="start Kueue"
  if [[ $(id -u) -eq 0 ]]; then ns=(unshare --mount --propagation private)
  else ns=(unshare --user --map-root-user --mount); fi
  # shellcheck disable=SC2016  # expanded by the inner bash
  k8s_start kueue "$K8S_TMP/kueue.log" "${ns[@]}" -- bash -c \
    'mount --bind "$1" "$2" && shift 2 && exec "$@"' kueue-mount "$dir/certs" \
    "$KUEUE_METRICS_CERTS" env KUBECONFIG="$KUBECONFIG" "$K8S_BIN/kueue" --config "$dir/config.yaml"
  KUEUE_PID=$K8S_LAST_PID
  KUEUE_WEBHOOK_PORT=$wh
  K8S_STEP="Kueue did not report ready on 127.0.0.1:$hp/readyz within 60 s"
  k8s_wait_for 60 "$KUEUE_PID" curl -sf "http://127.0.0.1:$hp/readyz" || return 1
  K8S_STEP="Kueue's webhooks did not admit a dry-run ResourceFlavor within 30 s"
  k8s_wait_for 30 "$KUEUE_PID" k8s_kueue_webhook_answers || return 1
  k8s_say "Kueue $(cat "$K8S_BIN/.kueue.version") ready (webhooks on 127.0.0.1:$wh)"
}

# k8s_kueue_pid_of NAME: the PID of the process k8s_start started as NAME.
k8s_kueue_pid_of() {
  local pid
  for pid in "${K8S_PIDS[@]}"; do
    [[ ${K8S_NAMES[$pid]} != "$1" ]] || { echo "$pid"; return 0; }
  done
  return 1
}

# k8s_kueue_crds_established COUNT: COUNT CRDs of group kueue.x-k8s.io exist, each Established.
k8s_kueue_crds_established() {
  local j='{.metadata.name} {.status.conditions[?(@.type=="Established")].status}{"\n"}'
  kc get crd -o "jsonpath={range .items[*]}$j{end}" |
    awk -v want="$1" '$1 ~ /\.kueue\.x-k8s\.io$/ { n++; if ($2 != "True") bad = 1 }
      END { exit (bad || n != want) }'
}

# k8s_kueue_webhook_answers: a server-side dry-run create of a ResourceFlavor passes Kueue's
# mutating webhook for it (which the apiserver calls; failurePolicy Fail).
k8s_kueue_webhook_answers() {
  kc create --dry-run=server -f - >/dev/null 2>&1 <<'YAML'
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: webhook-probe}
YAML
}

# k8s_kueue_nodes COUNT GPUS: COUNT kwok nodes bench-node-0.. with GPUS nvidia.com/gpu each
# (k8s_kwok_nodes; label nvidia.com/gpu.product, which KUEUE_FLAVOR selects), waited Ready, and
# kube-controller-manager + kube-scheduler (k8s_start_kube_controllers), so that pods carrying an
# admission's node selector get bound to them and kwok runs them. Starts kwok unless it runs.
k8s_kueue_nodes() {
  local k
  if [[ -z ${KWOK_PID:-} ]]; then
    K8S_STEP="start kwok"
    k8s_start_kwok
  fi
  K8S_STEP="create $1 kwok nodes with $2 nvidia.com/gpu"
  k8s_kwok_nodes "$1" "$2" | kc apply -f - >/dev/null || return 1
  k8s_start_kube_controllers || return 1
  for ((k = 0; k < $1; k++)); do
    K8S_STEP="kwok node bench-node-$k did not become Ready within 60 s"
    k8s_wait_for 60 "$KWOK_PID" k8s_kueue_node_ready "bench-node-$k" || return 1
  done
}

k8s_kueue_node_ready() {
  [[ $(kc get node "$1" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}') == True ]]
}

# k8s_kueue_queue NAMESPACE QUEUE GPUS: ResourceFlavor KUEUE_FLAVOR (nodeLabels
# nvidia.com/gpu.product=KUEUE_GPU_PRODUCT; created unless it exists), ClusterQueue QUEUE (all
# namespaces; nvidia.com/gpu GPUS, cpu 1000, memory 4Ti in that flavour; preemption within the
# queue of lower priorities) and LocalQueue QUEUE in NAMESPACE pointing at it; waits until both
# report Active.
k8s_kueue_queue() {
  local ns=$1 q=$2 gpus=$3
  K8S_STEP="create ResourceFlavor $KUEUE_FLAVOR, ClusterQueue $q ($gpus GPUs), LocalQueue $ns/$q"
  kc apply -f - >/dev/null <<YAML || return 1
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: $KUEUE_FLAVOR}
spec:
  nodeLabels: {nvidia.com/gpu.product: $KUEUE_GPU_PRODUCT}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: $q}
spec:
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: $KUEUE_FLAVOR
      resources:
      - {name: cpu, nominalQuota: "1000"}
      - {name: memory, nominalQuota: 4Ti}
      - {name: nvidia.com/gpu, nominalQuota: "$gpus"}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: $q, namespace: $ns}
spec: {clusterQueue: $q}
YAML
  K8S_STEP="ClusterQueue $q and LocalQueue $ns/$q did not become Active within 30 s"
  k8s_wait_for 30 "$KUEUE_PID" k8s_kueue_queues_active "$ns" "$q"
}

k8s_kueue_queues_active() {
  local j='jsonpath={.status.conditions[?(@.type=="Active")].status}'
  [[ $(kc get clusterqueue "$2" -o "$j") == True ]] &&
    [[ $(kc get localqueue "$2" -n "$1" -o "$j") == True ]]
}
