#!/usr/bin/env bash
# The runtime dashboards on data from real runs: Debian's Prometheus scrapes (every 1 s,
# honor_labels, target label namespace=local) the /metrics of a real local `tlt run` of a short
# RLJob (TLT on: 3 worker processes, speculation, drafter training on released workers) and then
# of a short TSTPretrainJob. Afterwards check_run_data.py runs every panel query of the runtime
# dashboards over the runs' time range, as Grafana would (query_range), and requires data from
# each; and it reads the reclaimed share of idle GPU time off the reclamation dashboard's stat
# panel and compares it with the run's own report (report/tlt.json reclaimedShare).
# (When Prometheus first scrapes after the run's first steps, no query can see those: then the
# dashboard must match the scraped part, and the last scraped totals the report.)
# The operator's panels are left to the tests that run a real operator.
# Stops what it started (by PID) on exit. Last line: PASS or FAIL.
# Usage: tlt_run_scrape.sh TLT_BINARY SOURCE_DIR
set -u
tlt=$1
src=$(cd "$2" && pwd)
fail() { echo "FAIL: tlt_run_scrape: $*"; exit 1; }
T0=$SECONDS
command -v prometheus >/dev/null 2>&1 ||
  fail "the 'prometheus' binary is not installed; run scripts/setup.sh (Debian package prometheus)"
work=$(mktemp -d)
prom_pid=""
cleanup() {
  [[ -n $prom_pid ]] && kill "$prom_pid" 2>/dev/null && wait "$prom_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
rl_port=$(free_port) tst_port=$(free_port) prom_port=$(free_port)

# 40 steps (a step of this micro job takes well under a second: enough scrapes for the rates);
# three workers, and drafter training only once two are done: the first worker to finish sits
# idle until the second does, so the reclaimed share is strictly between 0 and 1 and comparing
# the dashboard's figure with the report's means something. The drafter trains in batches of 8
# here (whatever the manifest's): this test reads reclaimed time, not drafter steps.
sed -e "s|PLACEHOLDER|$work/rl|" -e "s|METRICSPORT|$rl_port|" -e "s|replicas: 2|replicas: 3|" \
  -e "s|^    steps: 4$|    steps: 40|" -e "s|everySteps: 1$|everySteps: 20|" \
  -e "s|batchSize: [0-9][0-9]*.*$|batchSize: 8\n      minIdleWorkers: 2|" \
  "$src/tests/manifests/e2e/rl-e2e.yaml" > "$work/rl.yaml"
# Longer than the TST end-to-end test's 24 steps, so rates have several scrapes to work with.
sed -e "s|PLACEHOLDER|$work/tst|" -e "s|steps: 24|steps: 120|" \
  -e "s|evalEverySteps: 8|evalEverySteps: 40|" \
  "$src/tests/manifests/e2e/tst-e2e.yaml" > "$work/tst.yaml"
printf '  metrics: {port: %s}\n' "$tst_port" >> "$work/tst.yaml"

cat > "$work/prometheus.yml" <<YML
global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: tlt-runs
    honor_labels: true
    scrape_interval: 1s
    scrape_timeout: 1s
    static_configs:
      - targets: ['127.0.0.1:$rl_port', '127.0.0.1:$tst_port']
        labels: {namespace: local}
YML
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
  --web.listen-address="127.0.0.1:$prom_port" > "$work/prometheus.log" 2>&1 &
prom_pid=$!
base="http://127.0.0.1:$prom_port"
for _ in $(seq 100); do curl -fsS "$base/-/ready" >/dev/null 2>&1 && break; sleep 0.2; done
curl -fsS "$base/-/ready" >/dev/null 2>&1 || { tail "$work/prometheus.log"; fail "Prometheus not ready"; }

start=$(date +%s)
"$tlt" run "$work/rl.yaml" > "$work/rl.log" 2>&1 ||
  { tail -30 "$work/rl.log"; fail "tlt run (RLJob) failed"; }
"$tlt" run "$work/tst.yaml" > "$work/tst.log" 2>&1 ||
  { tail -30 "$work/tst.log"; fail "tlt run (TSTPretrainJob) failed"; }
sleep 3  # both runs are over: their series end here
end=$(date +%s)
grep -q "metrics on http://localhost:$rl_port" "$work/rl.log" || fail "the RL run served no /metrics"
grep -q "metrics on http://localhost:$tst_port" "$work/tst.log" || fail "the TST run served no /metrics"

python3 "$src/tests/dashboards/check_run_data.py" "$base" "$src" "$start" "$end" \
  "$work/rl/report/tlt.json" || fail "see above"
echo "PASS: tlt_run_scrape: every runtime panel has data from real runs ($((SECONDS - T0)) s)"
