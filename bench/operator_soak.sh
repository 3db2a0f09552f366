#!/usr/bin/env bash
# Operator soak bench (issue 21, item 9): the real build/bin/tlt-operator against a real etcd +
# kube-apiserver with kwok nodes (scripts/k8s-env.sh), under the least-privilege RBAC of
# tests/operator/rbac.yaml, with --leader-elect:
#   1. idle: no jobs for --idle seconds (default 600);
#   2. load: --jobs RLJobs (default 300, bench/operator/rljob.yaml: 5 pods each, pinned to kwok
#      nodes) applied at once, until every pod is Running, then --after seconds more.
# The operator's VmRSS (/proc/PID/status) is sampled every --every seconds (default 10) from the
# moment /readyz answers. Prints every sample (t, phase, VmRSS MiB, VmHWM MiB, pods Running),
# then the idle growth: the last idle sample minus the first one taken after the first minute
# (the heap's start-up settling), and FAILs when it is 2 MiB or more.
# Usage: bench/operator_soak.sh [--idle S (600)] [--jobs N (300)] [--after S (60)]
#                               [--every S (10)] [--operator BINARY] [-- OPERATOR FLAGS...]
#        (K8S_BIN=DIR: the binaries of scripts/k8s-tools.sh; KEEP=1 keeps logs)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
idle=600 n_jobs=300 after=60 every=10 op=$src/build/bin/tlt-operator op_args=()
usage() { sed -n '/^# Usage:/,/^$/p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
while (($#)); do
  case $1 in
    --idle) idle=$2; shift 2 ;;
    --jobs) n_jobs=$2; shift 2 ;;
    --after) after=$2; shift 2 ;;
    --every) every=$2; shift 2 ;;
    --operator) op=$2; shift 2 ;;
    --) shift; op_args=("$@"); break ;;
    -h | --help) usage 0 ;;
    *) echo "bench/operator_soak: unknown argument $1" >&2; usage 2 >&2 ;;
  esac
done
for v in idle n_jobs after every; do
  [[ ${!v} =~ ^[0-9]+$ ]] || { echo "bench/operator_soak: --${v/n_/} wants a whole number" >&2; exit 2; }
done
((every > 0)) || { echo "bench/operator_soak: --every must be > 0" >&2; exit 2; }
[[ -x $op ]] || { echo "bench/operator_soak: $op is not built (scripts/build.sh --target tlt-operator)" >&2; exit 2; }
pods_per_node=100
n_pods=$((n_jobs * 5))
n_nodes=$(((n_pods + pods_per_node - 1) / pods_per_node))

source "$src/scripts/k8s-env.sh"
on_exit() { [[ $1 -eq 0 ]] || echo "bench/operator_soak: FAILED: $K8S_STEP" >&2; }
K8S_ON_EXIT=on_exit
k8s_env_begin operator-soak kwok
k8s_start_kwok
k8s_kwok_nodes "$n_nodes" "$pods_per_node" >"$K8S_TMP/nodes.yaml"
((n_nodes == 0)) || kc apply -f "$K8S_TMP/nodes.yaml" >/dev/null
k8s_install_operator
kc create namespace bench >/dev/null
kc create serviceaccount default -n bench >/dev/null
job_tmpl=$(<"$src/bench/operator/rljob.yaml")
for ((i = 0; i < n_jobs; i++)); do
  s=${job_tmpl//@JOB@/soak-$i}
  printf '%s\n---\n' "${s//@NODE@/bench-node-$((i * 5 / pods_per_node))}"
done >"$K8S_TMP/jobs.yaml"

k8s_free_port METRICS_PORT
k8s_start_operator "$op" "$METRICS_PORT" --leader-elect --leader-election-namespace tlt-system \
  --leader-election-identity soak --pod-policy-allow nodeName ${op_args[@]+"${op_args[@]}"} ||
  k8s_fail "$K8S_STEP"
k8s_say "tlt-operator ready (pid $OP_PID); idle for $idle s, then $n_jobs RLJobs ($n_pods pods); VmRSS every $every s"

t0=$SECONDS
samples=()  # "t phase rss_kib hwm_kib running"
sample() {  # PHASE
  local rss hwm running=0
  kill -0 "$OP_PID" 2>/dev/null || k8s_fail "tlt-operator exited"
  rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$OP_PID/status")
  hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$OP_PID/status")
  [[ $1 == idle ]] || running=$(kc get pods -n bench --field-selector status.phase=Running \
    -o name 2>/dev/null | wc -l)
  samples+=("$((SECONDS - t0)) $1 $rss $hwm $running")
  printf '%6d s  %-5s  VmRSS %7.1f MiB  VmHWM %7.1f MiB  pods Running %d\n' "$((SECONDS - t0))" \
    "$1" "$(bc -l <<<"$rss/1024")" "$(bc -l <<<"$hwm/1024")" "$running"
  LAST_RUNNING=$running
}
K8S_STEP="idle phase"
next=0
while ((SECONDS - t0 <= idle)); do
  if ((SECONDS - t0 >= next)); then sample idle; next=$((next + every)); fi
  sleep 1
done
idle_samples=("${samples[@]}")
if ((n_jobs > 0)); then
  K8S_STEP="load phase: apply $n_jobs RLJobs"
  kc apply -f "$K8S_TMP/jobs.yaml" >/dev/null
  t_load=$SECONDS
  K8S_STEP="load phase: $n_pods pods Running"
  until ((LAST_RUNNING >= n_pods)); do
    ((SECONDS - t_load < 600)) || k8s_fail "$K8S_STEP (only $LAST_RUNNING after 600 s)"
    sample load
    sleep "$every"
  done
  t_done=$SECONDS
  while ((SECONDS - t_done < after)); do sleep "$every"; sample load; done
fi

# Idle growth: from the first sample at or after 60 s (the heap settles after the first lists and
# watches) to the last idle sample.
first='' last=''
for s in "${idle_samples[@]}"; do
  read -r t _ rss _ _ <<<"$s"
  [[ -z $first && $t -ge 60 ]] && first=$rss
  last=$rss
done
[[ -n $first ]] || { first=$(awk '{print $3}' <<<"${idle_samples[0]}"); }
read -r _ _ _ hwm _ <<<"${samples[-1]}"
growth=$(bc -l <<<"($last - $first) / 1024")
printf 'idle: VmRSS %.1f MiB at 60 s -> %.1f MiB at %d s: growth %.2f MiB (limit 2 MiB); peak VmHWM %.1f MiB\n' \
  "$(bc -l <<<"$first/1024")" "$(bc -l <<<"$last/1024")" "$idle" "$growth" "$(bc -l <<<"$hwm/1024")"
if (($(bc <<<"$growth >= 2"))); then
  K8S_STEP="idle growth $growth MiB >= 2 MiB"
  exit 1
fi
echo "bench/operator_soak: PASS"
