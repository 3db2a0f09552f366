#!/usr/bin/env bash
# dashboards/render (render.mjs: Chart.js in Debian's headless Chromium) against a real Prometheus:
#   1. metrics_demo (the runtime's real exporter) behind Debian's Prometheus, scraping every
#      second (tests/metrics/demo_env.sh); the idle-GPU reclamation dashboard rendered from it to
#      a 1600 px PNG with namespace=tlt-test, job=demo-job; check_render.py: a valid PNG of the
#      grid's size, every panel over exported metrics has series, every panel with points was
#      drawn (page report and the PNG's own pixels), every panel without data marked "No data";
#   2. a Prometheus that scrapes nothing: render.mjs --require-data exits 2 and names every
#      panel, each marked "No data" in the PNG (which check_render.py rejects as a picture of
#      metrics_demo's data: the checker's negative control);
#   3. an unreachable Prometheus: exit 1.
# Stops what it started (by PID) on exit. Last line: PASS or FAIL.
# Usage: render.sh METRICS_DEMO_BINARY SOURCE_DIR
set -u
demo=$1
src=$(cd "$2" && pwd)
fail() { echo "FAIL: dashboards render: $*"; exit 1; }
# shellcheck source=tests/metrics/demo_env.sh
source "$src/tests/metrics/demo_env.sh"
T0=$SECONDS
render=$src/dashboards/render/render.mjs
dashboard=$src/dashboards/tlt-idle-gpu-reclamation.json

command -v node >/dev/null 2>&1 || fail "node is not installed; run scripts/setup.sh"
[ -x /usr/bin/chromium ] || fail "/usr/bin/chromium is missing; run scripts/setup.sh (Debian package chromium)"
[ -f "$src/dashboards/render/node_modules/chart.js/dist/chart.umd.min.js" ] ||
  fail "dashboards/render/node_modules is missing; run scripts/setup.sh (npm ci in dashboards/render)"

demo_env_init
empty_pid=""
trap '[ -n "$empty_pid" ] && kill "$empty_pid" 2>/dev/null && wait "$empty_pid" 2>/dev/null; demo_env_cleanup' EXIT

# 1. the exporter, Prometheus, and the dashboard drawn from it.
start_metrics_demo "$demo" 300
start_prometheus tlt-dashboards-render "{namespace: tlt-test}"
base="http://127.0.0.1:$prom_port"
# Rates over $__rate_interval (4 s at 1 s scrapes) need two samples: wait for eight scrapes, so
# that the lines span a quarter of the 30 s drawn.
for _ in $(seq 120); do
  kill -0 "$prom_pid" 2>/dev/null || { tail -20 "$work/prometheus.log"; fail "prometheus exited"; }
  n=$(curl -fsS "$base/api/v1/query" --data-urlencode 'query=count_over_time(tlt_rl_step[1m])' 2>/dev/null |
      python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(int(float(r[0]["value"][1])) if r else 0)' 2>/dev/null)
  [ "${n:-0}" -ge 8 ] && break
  sleep 0.5
done
[ "${n:-0}" -ge 8 ] || { tail -20 "$work/prometheus.log"; fail "fewer than 8 scrapes of tlt_rl_step within 60 s"; }

node "$render" --prometheus "$base" --dashboard "$dashboard" --from now-30s --to now \
  --scrape-interval 1s --var namespace=tlt-test --var job=demo-job --width 1600 \
  --out "$work/main.png" --report "$work/main.json" > "$work/render.out" 2>&1
rc=$?
cat "$work/render.out"
[ $rc -eq 0 ] || fail "render.mjs exited $rc on the demo Prometheus (expected 0)"
python3 "$src/tests/dashboards/check_render.py" data "$work/main.png" "$work/main.json" "$dashboard" \
  "$work/exposition.txt" 1600 || fail "the rendered dashboard: see the problems above"
with_data=$(python3 -c 'import json,sys; print(sum(not p["noData"] for p in json.load(open(sys.argv[1]))["panels"]))' "$work/main.json")
[ "$with_data" -ge 5 ] || fail "only $with_data panels with data from metrics_demo"

# 2. a Prometheus without tlt metrics: --require-data fails, naming every panel.
empty_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
printf 'global:\n  scrape_interval: 1s\n' > "$work/empty.yml"
prometheus --config.file="$work/empty.yml" --storage.tsdb.path="$work/empty-tsdb" \
  --web.listen-address="127.0.0.1:$empty_port" > "$work/empty.log" 2>&1 &
empty_pid=$!
for _ in $(seq 100); do curl -fsS "http://127.0.0.1:$empty_port/-/ready" >/dev/null 2>&1 && break; sleep 0.2; done
curl -fsS "http://127.0.0.1:$empty_port/-/ready" >/dev/null 2>&1 || { tail -20 "$work/empty.log"; fail "the empty Prometheus is not ready"; }
node "$render" --prometheus "http://127.0.0.1:$empty_port" --dashboard "$dashboard" --from now-5m \
  --scrape-interval 1s --require-data --out "$work/empty.png" --report "$work/empty.json" > "$work/empty.out" 2>&1
rc=$?
tail -2 "$work/empty.out"
[ $rc -eq 2 ] || { cat "$work/empty.out"; fail "render.mjs --require-data exited $rc on a Prometheus without tlt metrics (expected 2)"; }
panels=$(python3 -c 'import json,sys; print(sum(p["type"] != "row" for p in json.load(open(sys.argv[1]))["panels"]))' "$dashboard")
listed=$(grep -c '): no data' "$work/empty.out")
[ "$listed" -eq "$panels" ] || fail "--require-data listed $listed panels without data, expected all $panels"
grep -q "no data in $panels panel(s)" "$work/empty.out" || fail "no --require-data summary line"
python3 "$src/tests/dashboards/check_render.py" empty "$work/empty.png" "$work/empty.json" "$dashboard" - 1600 \
  > "$work/check-empty.out" 2>&1 ||
  { cat "$work/check-empty.out"; fail "the PNG from the empty Prometheus does not mark every panel No data"; }
# ... and the checker catches undrawn panels: that PNG is no picture of metrics_demo's data.
python3 "$src/tests/dashboards/check_render.py" data "$work/empty.png" "$work/empty.json" "$dashboard" \
  "$work/exposition.txt" 1600 > "$work/check-negative.out" 2>&1 &&
  fail "check_render.py accepted a PNG without data as a picture of metrics_demo's data"

# 3. no Prometheus at all.
node "$render" --prometheus "http://127.0.0.1:1" --out "$work/none.png" > "$work/none.out" 2>&1
rc=$?
[ $rc -eq 1 ] || { cat "$work/none.out"; fail "render.mjs exited $rc with an unreachable Prometheus (expected 1)"; }
grep -q 'render: error: Prometheus at' "$work/none.out" || { cat "$work/none.out"; fail "no error message for an unreachable Prometheus"; }

echo "PASS: dashboards render: $(basename "$dashboard") drawn from Prometheus to a valid" \
  "1600 px PNG, $with_data/$panels panels with data drawn, the others marked No data;" \
  "--require-data exits 2 without tlt metrics ($((SECONDS - T0)) s)"
