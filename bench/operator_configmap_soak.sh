#!/usr/bin/env bash
# Foreign ConfigMaps soak (issue 41): does another user's labelled data grow the operator? The
# real tlt-operator against a real etcd + kube-apiserver (scripts/k8s-env.sh) under the RBAC of
# tests/operator/rbac.yaml, with one RLJob of its own (so that its informers hold real children):
#   1. the operator starts; its VmRSS is sampled for --settle seconds (before: the last sample);
#   2. --count ConfigMaps (default 300) of --kib KiB of data each (default 922, 0.9 MiB) are
#      created in namespace research by the test's admin user -- not the operator -- labelled
#      tlt.dev/job=<a job's name> and app.kubernetes.io/managed-by=tlt-operator (the labels the
#      operator's informers select), without an ownerReference; VmRSS sampled every second while
#      they are created (during: the peak) and for --settle seconds after (after: the last);
#   3. the ConfigMaps are deleted and the operator stopped.
# With --baseline BINARY the same is done again, in the same run, for that operator (e.g. an
# older release). Prints every sample, then per operator: before, peak during, after (MiB), and
# after/before; exits 1 when the --operator's ratio is --max-ratio or more (not flat).
# Usage: bench/operator_configmap_soak.sh [--count N (300)] [--kib K (922)] [--settle S (20)]
#        [--max-ratio R (1.2)]
#          [--operator BINARY (build/bin/tlt-operator)] [--baseline BINARY]
#        (K8S_BIN=DIR: the binaries of scripts/k8s-tools.sh; KEEP=1 keeps logs)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
count=300 kib=922 settle=20 max_ratio=1.2 op=$src/build/bin/tlt-operator baseline=''
usage() { sed -n '/^# Usage:/,/^$/p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
while (($#)); do
  case $1 in
    --count) count=$2; shift 2 ;;
    --kib) kib=$2; shift 2 ;;
    --settle) settle=$2; shift 2 ;;
    --max-ratio) max_ratio=$2; shift 2 ;;
    --operator) op=$2; shift 2 ;;
    --baseline) baseline=$2; shift 2 ;;
    -h | --help) usage 0 ;;
    *) echo "bench/operator_configmap_soak: unknown argument $1" >&2; usage 2 >&2 ;;
  esac
done
for v in count kib settle; do
  [[ ${!v} =~ ^[0-9]+$ ]] || { echo "bench/operator_configmap_soak: --$v wants a whole number" >&2; exit 2; }
done
for b in "$op" ${baseline:+"$baseline"}; do
  [[ -x $b ]] || { echo "bench/operator_configmap_soak: $b is not built" >&2; exit 2; }
done

source "$src/scripts/k8s-env.sh"
on_exit() { [[ $1 -eq 0 ]] || echo "bench/operator_configmap_soak: FAILED: $K8S_STEP" >&2; }
K8S_ON_EXIT=on_exit
k8s_env_begin operator-configmap-soak
k8s_install_operator
kc apply -f - >/dev/null <<'YAML'
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata: {name: own, namespace: research}
spec:
  roles:
    rollout: {replicas: 2}
    trainer: {replicas: 1}
YAML

K8S_STEP="write the ConfigMaps' manifests"
mkdir -p "$K8S_TMP/cms"
payload=$(head -c "$((kib * 1024))" /dev/zero | tr '\0' 'x')
for ((i = 0; i < count; i++)); do
  printf '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"foreign-%d","namespace":"research","labels":{"tlt.dev/job":"own","app.kubernetes.io/managed-by":"tlt-operator"}},"data":{"blob":"%s"}}\n' \
    "$i" "$payload" >"$K8S_TMP/cms/cm-$i.json"
done
unset payload

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
mib() { bc -l <<<"$1/1024"; }
results=()
measure() {  # NAME BINARY
  local name=$1 bin=$2 before peak=0 after r t0 i
  K8S_STEP="$name: start the operator"
  k8s_free_port METRICS_PORT
  k8s_start_operator "$bin" "$METRICS_PORT" --watch-timeout 60 || k8s_fail "$K8S_STEP" operator
  t0=$SECONDS
  sample() {  # PHASE -> R (KiB)
    kill -0 "$OP_PID" 2>/dev/null || k8s_fail "$name: the operator exited" operator
    R=$(rss_kib "$OP_PID")
    printf '%s %5d s  %-6s VmRSS %7.1f MiB\n' "$name" "$((SECONDS - t0))" "$1" "$(mib "$R")"
  }
  for ((i = 0; i < settle; i++)); do sample before; sleep 1; done
  before=$R
  K8S_STEP="$name: create $count ConfigMaps of $kib KiB"
  kc create -f "$K8S_TMP/cms" >/dev/null &
  local creator=$!
  while kill -0 "$creator" 2>/dev/null; do
    sample during
    ((R > peak)) && peak=$R
    sleep 1
  done
  wait "$creator" || k8s_fail "$K8S_STEP" operator
  for ((i = 0; i < settle; i++)); do
    sample after
    ((R > peak)) && peak=$R
    sleep 1
  done
  after=$R
  K8S_STEP="$name: delete the ConfigMaps"
  kc delete configmaps -n research -l tlt.dev/job=own,app.kubernetes.io/managed-by=tlt-operator \
    --field-selector 'metadata.name!=own-rl-spec' >/dev/null
  kill "$OP_PID" 2>/dev/null || true
  wait "$OP_PID" 2>/dev/null || true
  results+=("$name $before $peak $after")
}
measure operator "$op"
[[ -z $baseline ]] || measure baseline "$baseline"

echo "foreign ConfigMaps: $count x $kib KiB, labelled tlt.dev/job and managed-by, no owner"
status=0
for r in "${results[@]}"; do
  read -r name before peak after <<<"$r"
  ratio=$(bc -l <<<"$after/$before")
  printf '%-8s VmRSS before %7.1f MiB  peak during %7.1f MiB  after %7.1f MiB  after/before %.2f\n' \
    "$name" "$(mib "$before")" "$(mib "$peak")" "$(mib "$after")" "$ratio"
  if [[ $name == operator ]] && (($(bc <<<"$ratio >= $max_ratio"))); then status=1; fi
done
((status == 0)) && echo "bench/operator_configmap_soak: PASS (flat)" ||
  { K8S_STEP="the operator's VmRSS grew ${max_ratio}x or more"; exit 1; }
