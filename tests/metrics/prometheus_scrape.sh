#!/usr/bin/env bash
# A real Prometheus scrapes tlt's /metrics: metrics_demo serves RuntimeMetrics with known values
# on a free port, Prometheus (Debian's `prometheus`, installed by scripts/setup.sh) scrapes it
# every second, and its HTTP query API must return those values with their labels. Also lints
# the exposition with `promtool check metrics` when promtool exists.
# Usage: prometheus_scrape.sh METRICS_DEMO_BINARY
set -u
demo=$1
fail() { echo "FAIL: $*"; exit 1; }
# shellcheck source=tests/metrics/demo_env.sh
source "$(dirname "$0")/demo_env.sh"
demo_env_init

# 1. The exporter, on a free port it picks itself.
start_metrics_demo "$demo" 120
grep -q '^tlt_rl_step{job="demo-job"} 42$' "$work/exposition.txt" ||
  { cat "$work/exposition.txt"; fail "exposition lacks tlt_rl_step 42"; }

# 2. promtool's lint of names, types and help texts.
if command -v promtool >/dev/null 2>&1; then
  promtool check metrics < "$work/exposition.txt" > "$work/promtool.log" 2>&1 ||
    { cat "$work/promtool.log"; fail "promtool check metrics rejected the exposition"; }
  echo "promtool check metrics: ok"
else
  echo "promtool not found: lint skipped"
fi

# 3. Prometheus, on a free port with its own storage. honor_labels keeps our `job` label (else
#    Prometheus renames it exported_job); the test checks it survives.
start_prometheus tlt-scrape-test

# 4. Wait for a successful scrape, then query. All checks in one Python program.
python3 - "http://127.0.0.1:$prom_port" "$prom_pid" <<'PY' || { tail -20 "$work/prometheus.log"; exit 1; }
import json, os, sys, time, urllib.parse, urllib.request
base, prom_pid = sys.argv[1], int(sys.argv[2])

def fail(msg):
    print("FAIL:", msg); sys.exit(1)

def get(path):
    with urllib.request.urlopen(base + path, timeout=5) as r:
        return json.load(r)

def query(q):
    d = get("/api/v1/query?query=" + urllib.parse.quote(q))
    if d.get("status") != "success": fail("query %s: %s" % (q, d))
    return d["data"]["result"]

deadline = time.time() + 60
up = False
while time.time() < deadline:
    try:
        os.kill(prom_pid, 0)
    except OSError:
        fail("prometheus exited")
    try:
        targets = get("/api/v1/targets")["data"]["activeTargets"]
        if targets and targets[0]["health"] == "up" and query("tlt_rl_step"):
            up = True
            break
    except OSError:
        pass  # not listening yet
    time.sleep(0.5)
if not up: fail("target never up with samples within 60 s")

def one(q):
    r = query(q)
    if len(r) != 1: fail("%s: expected one series, got %s" % (q, r))
    return r[0]["metric"], float(r[0]["value"][1])

def expect(q, want):
    _, v = one(q)
    if v != want: fail("%s = %s, want %s" % (q, v, want))
    print("ok: %s = %s" % (q, v))

labels, step = one("tlt_rl_step")
if step != 42: fail("tlt_rl_step = %s, want 42" % step)
if labels.get("job") != "demo-job": fail("tlt_rl_step labels %s: want job=demo-job" % labels)
print("ok: tlt_rl_step = 42 %s" % labels)
expect('up{job="tlt-scrape-test"}', 1)
expect("tlt_rl_reward_mean", 0.75)
expect("tlt_rollout_tokens_total", 1234)
expect("tlt_tst_phase", 2)
expect('tlt_worker_state{pod="pod-0",state="training"}', 1)
expect('tlt_worker_state{pod="pod-0",state="generating"}', 0)
expect('tlt_worker_state{pod="pod-1",state="generating"}', 1)
expect('sum(tlt_worker_state{job="demo-job"})', 2)
expect('tlt_gpu_busy_ratio{pod="pod-0"}', 0.5)
expect('tlt_drafter_assigned{pod="pod-1"}', 1)
expect("tlt_spec_accept_length_count", 4)
expect('tlt_spec_accept_length_bucket{le="3"}', 3)
expect('histogram_quantile(1, tlt_spec_accept_length_bucket)', 7)
expect('tlt_spec_arm_selected_total{arm="8_4_48"}', 3)
expect("tlt_reclaimed_seconds_total", 12.5)
PY
echo "prometheus scrape: all values made it through"
