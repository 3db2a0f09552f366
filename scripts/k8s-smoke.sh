#!/usr/bin/env bash
# Smoke test of the Kubernetes test binaries from scripts/k8s-tools.sh, on the control plane of
# scripts/k8s-env.sh (etcd, a kube-apiserver with token auth, RBAC, service-account keys and a
# self-signed serving cert, and kwok, all on 127.0.0.1 in a temp dir): checks /readyz, the API
# resources, that a fake Node managed by kwok becomes Ready, a Pod bound to it Running, and that
# the Pod goes away when deleted; installs and uninstalls a tiny chart with helm; checks that
# every listener is on 127.0.0.1; then stops everything it started, by PID, also on failure or
# Ctrl-C.
#
# Usage: scripts/k8s-smoke.sh           # builds the binaries first if they are not cached yet
#        K8S_BIN=DIR scripts/k8s-smoke.sh   # use the binaries in DIR instead
#        KEEP=1 scripts/k8s-smoke.sh        # keep the temp dir (logs, certs) afterwards
# Prints one line starting with PASS or FAIL last; exits 0 only on PASS.
# Needs: openssl (the service-account key), bash's /dev/tcp (free ports).
set -euo pipefail
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/k8s-env.sh"

k8s_test_begin "k8s smoke" kwok
k8s_say "kubectl get --raw /readyz: $(kc get --raw /readyz)"
K8S_STEP="kubectl api-resources"
kc api-resources >"$K8S_TMP/api-resources.txt"
k8s_say "kubectl api-resources | head:"
head -n 10 "$K8S_TMP/api-resources.txt"
grep -q '^nodes ' "$K8S_TMP/api-resources.txt"
version=$(kc version -o yaml | awk '$1 == "gitVersion:" { v = $2 } END { print v }')
k8s_say "server version: $version"

# kwok with the shared stages (scripts/kwok-stages.yaml) and its fake GPU node gpu-node-0.
k8s_start_gpu_node
k8s_say "node gpu-node-0 is Ready:"
kc get node gpu-node-0 -o wide

# A pod bound to the node directly. No controller-manager runs, so the namespace's default
# ServiceAccount is created by hand.
K8S_STEP="create a pod on the fake node"
kc create serviceaccount default --namespace default >/dev/null 2>&1 || true
kc apply -f - >/dev/null <<'EOF_POD'
apiVersion: v1
kind: Pod
metadata:
  name: smoke-pod
  namespace: default
spec:
  nodeName: gpu-node-0
  automountServiceAccountToken: false
  containers:
  - name: c
    image: example.invalid/none:0
    resources:
      limits: {nvidia.com/gpu: "1"}
EOF_POD
pod_running() { [[ $(kc get pod smoke-pod -o 'jsonpath={.status.phase}') == Running ]]; }
K8S_WATCH_PID=$KWOK_PID
wait_until 60 "the pod on the fake node did not become Running" pod_running
k8s_say "pod smoke-pod is Running:"
kc get pod smoke-pod -o wide
K8S_STEP="the deleted pod was not removed within 60 s"
kc delete pod smoke-pod --wait=true --timeout=60s >/dev/null
k8s_say "pod smoke-pod deleted"

# helm: install and uninstall a one-ConfigMap chart made here.
HELM_OK=""
if [[ -x "$K8S_BIN/helm" ]]; then
  K8S_STEP="helm install of a one-ConfigMap chart"
  mkdir -p "$K8S_TMP/chart/templates"
  printf 'apiVersion: v2\nname: smoke\nversion: 0.1.0\n' >"$K8S_TMP/chart/Chart.yaml"
  printf 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cm\ndata:\n  kube: {{ .Capabilities.KubeVersion.Version | quote }}\n' \
    >"$K8S_TMP/chart/templates/cm.yaml"
  export HELM_CACHE_HOME="$K8S_TMP/helm/cache" HELM_CONFIG_HOME="$K8S_TMP/helm/config"
  export HELM_DATA_HOME="$K8S_TMP/helm/data"
  hm() { "$K8S_BIN/helm" --kubeconfig "$KUBECONFIG" "$@"; }
  hm install smoke "$K8S_TMP/chart" --namespace default >/dev/null
  kube=$(kc get configmap smoke-cm -o 'jsonpath={.data.kube}')
  k8s_say "helm installed release smoke; its ConfigMap says kube=$kube"
  hm uninstall smoke --namespace default >/dev/null
  k8s_say "helm uninstalled release smoke"
  HELM_OK=" and helm"
fi

# Every TCP listener of the processes started here must be on 127.0.0.1.
K8S_STEP="a process listens beyond 127.0.0.1"
if command -v ss >/dev/null 2>&1; then
  listeners=$(ss -Htlnp)
  for pid in "${K8S_PIDS[@]}"; do
    addrs=$(awk -v p="pid=$pid," 'index($0, p) { print $4 }' <<<"$listeners" | sort -u | paste -sd' ')
    k8s_say "${K8S_NAMES[$pid]} listens on: ${addrs:-nothing}"
    for a in $addrs; do [[ $a == 127.0.0.1:* ]] || fail "$K8S_STEP: ${K8S_NAMES[$pid]} on $a"; done
  done
else
  k8s_say "ss is not installed: listener addresses not checked"
fi
k8s_test_finish "etcd, kube-apiserver, kubectl, kwok$HELM_OK work on 127.0.0.1 ($K8S_BIN)"
