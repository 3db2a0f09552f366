#!/usr/bin/env bash
# Two `tlt run`s sharing the machine's cores, under libgomp's default wait policy (each waiting
# OpenMP thread spins about a millisecond) and under tlt's (GOMP_SPINCOUNT=300, about 10 us;
# runtime/torch_env.h), side by side in one run, plus one run alone under each. The job is the
# CLI test's 4-step RLJob (tests/manifests/e2e/rl-e2e.yaml). A pair still running after CAP
# seconds is stopped and reported as "> CAP".
# Usage: bench/openmp_wait.sh [CAP]   (default 120)
set -uo pipefail
cd "$(dirname "$0")/.."
cap=${1:-120}
tlt=build/bin/tlt
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
manifest() {  # manifest NAME
  sed -e "s|PLACEHOLDER|$work/$1|" -e "s|METRICSPORT|0|" tests/manifests/e2e/rl-e2e.yaml > "$work/$1.yaml"
}
now() { date +%s.%N; }
# timed MODE N: wall seconds of N concurrent runs under MODE (default: libgomp's; tlt: ours).
timed() {
  local env=(env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY) pids=() t0 i
  [ "$1" = default ] && env+=(TLT_NO_REEXEC=1)
  for i in $(seq 1 "$2"); do manifest "$1-$2-$i"; done
  t0=$(now)
  for i in $(seq 1 "$2"); do
    timeout -k 2 "$cap" "${env[@]}" "$tlt" run "$work/$1-$2-$i.yaml" > "$work/$1-$2-$i.log" 2>&1 &
    pids+=($!)
  done
  local rc=0
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then echo "> $cap"; return; fi
  [ "$rc" = 0 ] || { echo "failed ($rc; log $work)"; return; }
  python3 -c "import sys; print('%.1f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$t0" "$(now)"
}
"$tlt" run "$(manifest warm; echo "$work/warm.yaml")" > /dev/null 2>&1  # the warm starts, cached
printf "%-24s %12s %12s\n" "" "libgomp" "tlt"
printf "%-24s %12s %12s\n" "one run alone, s" "$(timed default 1)" "$(timed tlt 1)"
printf "%-24s %12s %12s\n" "two runs at once, s" "$(timed default 2)" "$(timed tlt 2)"
echo "($(nproc) cores; wall seconds until every run of the row has finished)"
