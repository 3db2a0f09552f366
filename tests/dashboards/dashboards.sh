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
# shellcheck source=tests/metrics/demo_env.sh
source "$src/tests/metrics/demo_env.sh"
T0=$SECONDS

# 1. generated files are current (the chart links to them; tests/helm/chart.sh checks that).
python3 "$src/dashboards/gen.py" --check || fail "dashboards/*.json are not what dashboards/gen.py writes"

demo_env_init

# 2. the exporter and Prometheus; a target label `namespace`, as the Prometheus operator
#    attaches to every pod it scrapes.
start_metrics_demo "$demo" 300
start_prometheus tlt-dashboards-test "{namespace: tlt-test}"
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
