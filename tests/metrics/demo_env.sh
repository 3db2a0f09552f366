# shellcheck shell=bash
# Shared set-up of the tests that put metrics_demo behind a real Prometheus; to be sourced
# after the caller defines fail(). Stops what it started (by PID) and removes $work on exit.
#
#   source tests/metrics/demo_env.sh
#   demo_env_init                      # $work, the exit trap
#   start_metrics_demo BINARY SECONDS  # $port, $work/exposition.txt
#   start_prometheus JOB [TARGET_LABELS_YAML]  # $prom_port, $prom_pid; scrapes every 1 s
#                                      # with honor_labels (our `job` label survives)

demo_env_init() {
  command -v prometheus >/dev/null 2>&1 ||
    fail "the 'prometheus' binary is not installed; run scripts/setup.sh (Debian package prometheus)"
  command -v curl >/dev/null 2>&1 || fail "curl is not installed"
  work=$(mktemp -d)
  demo_pid=""; prom_pid=""
  trap demo_env_cleanup EXIT
  trap 'exit 1' INT TERM
}

demo_env_cleanup() {
  local pid
  for pid in $prom_pid $demo_pid; do
    kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  done
  rm -rf "$work"
}

start_metrics_demo() {  # BINARY SECONDS
  "$1" "$work/demo.port" "$2" > "$work/demo.log" 2>&1 &
  demo_pid=$!
  for _ in $(seq 100); do [ -s "$work/demo.port" ] && break; sleep 0.1; done
  [ -s "$work/demo.port" ] || { cat "$work/demo.log"; fail "metrics_demo wrote no port"; }
  port=$(cat "$work/demo.port")
  curl -fsS "http://127.0.0.1:$port/metrics" > "$work/exposition.txt" ||
    fail "GET http://127.0.0.1:$port/metrics failed"
}

start_prometheus() {  # JOB_NAME [TARGET_LABELS_YAML]
  prom_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  cat > "$work/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: $1
    honor_labels: true
    scrape_interval: 1s
    scrape_timeout: 1s
    static_configs:
      - targets: ['127.0.0.1:$port']
${2:+        labels: $2}
YML
  prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
    --web.listen-address="127.0.0.1:$prom_port" > "$work/prometheus.log" 2>&1 &
  prom_pid=$!
}
