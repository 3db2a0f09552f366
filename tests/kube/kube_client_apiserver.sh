#!/usr/bin/env bash
# The operator's Kubernetes client (kube) against a real etcd + kube-apiserver with the
# tlt CRDs: runs kube_client_it with the control plane's kubeconfig (bearer token + CA) and with
# client-certificate kubeconfigs (data and file forms; and a certificate of an untrusted CA).
# Usage: kube_client_apiserver.sh KUBE_CLIENT_IT_BINARY SOURCE_DIR   (K8S_BIN=DIR, KEEP=1)
set -euo pipefail
it=$1
src=$(cd "$2" && pwd)
source "$src/scripts/k8s-env.sh"
k8s_test_begin kube_client_apiserver
K8S_STEP="install the CRDs"
kc apply -f "$src/crds/" >/dev/null
kc wait --for condition=established --timeout=60s crd/rljobs.tlt.dev >/dev/null
kc create namespace kube-it >/dev/null

# cert_kubeconfig FILE CERT KEY [EMBED]: the control plane's cluster with a client-certificate
# user (client-certificate-data / client-key-data when EMBED=true, else file paths).
cert_kubeconfig() {
  cp "$KUBECONFIG" "$1"
  "$K8S_BIN/kubectl" config --kubeconfig "$1" set-credentials cert-user \
    --client-certificate "$2" --client-key "$3" --embed-certs="${4:-false}" >/dev/null
  "$K8S_BIN/kubectl" config --kubeconfig "$1" set-context cert --cluster test --user cert-user \
    >/dev/null
  "$K8S_BIN/kubectl" config --kubeconfig "$1" use-context cert >/dev/null
}
K8S_STEP="write the client-certificate kubeconfigs"
cert_kubeconfig "$K8S_TMP/cert-data.kubeconfig" "$K8S_CLIENT_CERT" "$K8S_CLIENT_KEY" true
cert_kubeconfig "$K8S_TMP/cert-file.kubeconfig" "$K8S_CLIENT_CERT" "$K8S_CLIENT_KEY"
# The same user and group, signed by a CA the apiserver does not trust.
k8s_client_ca "$K8S_TMP/other-ca"
k8s_client_cert "$K8S_TMP/other-ca" "$K8S_TMP/wrong" tlt-cert-user system:masters
cert_kubeconfig "$K8S_TMP/cert-wrong.kubeconfig" "$K8S_TMP/wrong.crt" "$K8S_TMP/wrong.key" true
grep -q client-certificate-data "$K8S_TMP/cert-data.kubeconfig"

K8S_STEP="kube_client_it failed (its output is above)"
TLT_TEST_KUBECONFIG=$KUBECONFIG \
  TLT_TEST_CERT_KUBECONFIG="$K8S_TMP/cert-data.kubeconfig" \
  TLT_TEST_CERT_FILE_KUBECONFIG="$K8S_TMP/cert-file.kubeconfig" \
  TLT_TEST_WRONG_CERT_KUBECONFIG="$K8S_TMP/cert-wrong.kubeconfig" \
  "$it"
k8s_test_finish "kube_client_it with a bearer token and with client certificates (data, file," \
  "untrusted CA)"
