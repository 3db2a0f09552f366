#!/usr/bin/env bash
# The operator's Kubernetes client (operator/kube) against a real etcd + kube-apiserver with the
# tlt CRDs: runs kube_client_it with the control plane's kubeconfig (bearer token + CA).
# Usage: kube_client_apiserver.sh KUBE_CLIENT_IT_BINARY SOURCE_DIR   (K8S_BIN=DIR, KEEP=1)
set -euo pipefail
it=$1
src=$(cd "$2" && pwd)
source "$src/scripts/k8s-env.sh"
on_exit() {
  if [[ $1 -eq 0 ]]; then echo "PASS: kube_client_apiserver ($((SECONDS - T0)) s)"; else echo "FAIL: kube_client_apiserver: $K8S_STEP"; fi
}
T0=$SECONDS
K8S_ON_EXIT=on_exit
k8s_env_init kube-client
trap 'k8s_env_exit_trap' EXIT
trap 'K8S_STEP="interrupted by a signal"; exit 130' INT TERM
k8s_start_control_plane
K8S_STEP="install the CRDs"
kc apply -f "$src/crds/" >/dev/null
kc wait --for condition=established --timeout=60s crd/rljobs.tlt.dev >/dev/null
kc create namespace kube-it >/dev/null
K8S_STEP="kube_client_it failed (its output is above)"
TLT_TEST_KUBECONFIG=$KUBECONFIG "$it"
K8S_STEP="stop everything"
