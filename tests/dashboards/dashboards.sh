#!/usr/bin/env bash
# tlt's Grafana dashboards against a real Prometheus:
#   1. dashboards/*.json are what dashboards/gen.py writes;
#   2. metrics_demo (the runtime's real exporter, RuntimeMetrics) serves every runtime family on
#      a free port; Debian's Prometheus scrapes it every second with honor_labels: true (as the
#      chart's PodMonitor does), from a temp storage dir;
#   3. check_dashboards.py: conventions, every metric name exported (or a listed pending
#      operator name), and every panel and variable query run through /api/v1/query and
#      /api/v1/label: a parse error fails, a runtime query without data fails.
# Stops what it started (by PID) on exit. Last line: PASS or FAIL.
# Usage: dashboards.sh METRICS_DEMO_BINARY SOURCE_DIR
set -u
demo=$1
src=$(cd "$2" && pwd)
fail() { echo "FAIL: dashboards: $*"; exit 1; }
command -v prometheus >/dev/null 2>&1 ||
  fail "the 'prometheus' binary is not installed; run scripts/setup.sh (Debian package prometheus)"
command -v curl >/dev/null 2>&1 || fail "curl is not installed"
T0=$SECONDS

# 1. generated files are current (the chart links to them; tests/helm/chart.sh checks that).
python3 "$src/dashboards/gen.py" --check || fail "dashboards/*.json are not what dashboards/gen.py writes"

work=$(mktemp -d)
demo_pid=""; prom_pid=""
cleanup() {
  for pid in $prom_pid $demo_pid; do
    kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# 2. the exporter and Prometheus.
"$demo" "$work/demo.port" 300 > "$work/demo.log" 2>&1 &
demo_pid=$!
for _ in $(seq 100); do [ -s "$work/demo.port" ] && break; sleep 0.1; done
[ -s "$work/demo.port" ] || { cat "$work/demo.log"; fail "metrics_demo wrote no port"; }
port=$(cat "$work/demo.port")
curl -fsS "http://127.0.0.1:$port/metrics" > "$work/exposition.txt" ||
  fail "GET http://127.0.0.1:$port/metrics failed"

prom_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat > "$work/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: tlt-dashboards-test
    honor_labels: true
    scrape_interval: 1s
    scrape_timeout: 1s
    static_configs:
      - targets: ['127.0.0.1:$port']
        # A target label, as the Prometheus operator attaches to every pod it scrapes.
        labels: {namespace: tlt-test}
YML
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
  --web.listen-address="127.0.0.1:$prom_port" > "$work/prometheus.log" 2>&1 &
prom_pid=$!
base="http://127.0.0.1:$prom_port"

# Rates need two samples inside [$__rate_interval] (1m here): wait for three scrapes.
python3 - "$base" "$prom_pid" <<'PY' || { tail -20 "$work/prometheus.log"; fail "no data in Prometheus"; }
import json, os, sys, time, urllib.parse, urllib.request
base, pid = sys.argv[1], int(sys.argv[2])
deadline = time.time() + 60
while time.time() < deadline:
    try:
        os.kill(pid, 0)
    except OSError:
        print("prometheus exited"); sys.exit(1)
    try:
        q = urllib.parse.quote("count_over_time(tlt_rl_step[1m])")
        with urllib.request.urlopen(base + "/api/v1/query?query=" + q, timeout=5) as r:
            res = json.load(r)["data"]["result"]
        if res and float(res[0]["value"][1]) >= 3:
            sys.exit(0)
    except OSError:
        pass
    time.sleep(0.5)
print("fewer than 3 scrapes of tlt_rl_step within 60 s"); sys.exit(1)
PY

# 3. the dashboards.
python3 "$src/tests/dashboards/check_dashboards.py" "$base" "$work/exposition.txt" "$src" tlt-test demo-job ||
  fail "see the problems above"
n=$(find "$src/dashboards" -maxdepth 1 -name '*.json' | wc -l)
version=$(prometheus --version 2>&1 | awk 'NR==1{print $3}')
echo "PASS: dashboards: $n dashboards generated, conventions hold, every query valid on" \
  "Prometheus $version ($((SECONDS - T0)) s)"
