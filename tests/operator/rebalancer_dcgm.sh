#!/usr/bin/env bash
# The rebalancer on NVIDIA DCGM exporter series, every part real: etcd + kube-apiserver
# (scripts/k8s-env.sh) with kwok running a fake GPU node, the real tlt-operator, and Debian's
# Prometheus scraping (every 1 s) a stand-in exporter that serves DCGM_FI_PROF_GR_ENGINE_ACTIVE
# (a 0..1 ratio) with dcgm-exporter's labels (gpu, UUID, device, modelName, Hostname, container,
# namespace, pod) for two RLJobs' rollout pods, in the two shapes a cluster has:
#   dcgm-a  scraped with honor_labels: true: the series keep pod/namespace (spec.rebalancing
#           podLabel: pod);
#   dcgm-b  scraped with honor_labels: false from a target that carries its own pod/namespace/
#           container labels (as Kubernetes service discovery gives the exporter's pod):
#           Prometheus itself renames the series' labels to exported_pod/exported_namespace
#           (podLabel: exported_pod).
# The exporter also serves, at value 0, a GPU no pod holds (pod="") and a pod of another
# namespace named like rollout-0 of each job: neither may count for the jobs.
#   1. every rollout pod at 0.9 for longer than a window: nothing is assigned (a ratio is not
#      scaled as a percent, which would make 0.9 read as 0.009, idle);
#   2. rollout-1 of each job at 0.02: each gets tlt.dev/assignment=drafter and an Event
#      PodAssignedToDrafter naming its highest value over the window (0.020); rollout-0 is
#      untouched although the other namespace's pod of that name sat at 0.
# Stops every process it started (by PID) on exit, also on failure. Last line: PASS or FAIL.
# Usage: rebalancer_dcgm.sh TLT_OPERATOR_BINARY SOURCE_DIR   (K8S_BIN=DIR, KEEP=1)
set -euo pipefail
op=$1
src=$(cd "$2" && pwd)
source "$src/scripts/k8s-env.sh"

WINDOW=4 INTERVAL=1 SCRAPE=1
METRIC=DCGM_FI_PROF_GR_ENGINE_ACTIVE
k8s_test_begin rebalancer_dcgm prometheus kwok
K8S_FAIL_LOGS="operator prometheus exporter kwok"

k8s_start_gpu_node

# ---- the exporter: /a and /b serve the jobs' series, values from a JSON file ---------------------
K8S_STEP="start the exporter"
set_util() {  # A0 A1 B0 B1: DCGM_FI_PROF_GR_ENGINE_ACTIVE of dcgm-a-rollout-0/1, dcgm-b-rollout-0/1
  printf '{"a": [%s, %s], "b": [%s, %s]}\n' "$@" >"$K8S_TMP/util.json.tmp"
  mv "$K8S_TMP/util.json.tmp" "$K8S_TMP/util.json"
}
set_util 0.9 0.9 0.9 0.9
cat >"$K8S_TMP/exporter.py" <<'PY'
import http.server, json, os, sys
state, port_file, metric = sys.argv[1:4]
def series(gpu, namespace, pod, value):
    return ('%s{gpu="%d",UUID="GPU-00000000-0000-0000-0000-%012d",device="nvidia%d",'
            'modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-0",container="%s",'
            'namespace="%s",pod="%s"} %s\n') % (metric, gpu, gpu, gpu,
                                                 "tlt" if pod else "", namespace, pod, value)
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        which = self.path.strip("/")
        if which not in ("a", "b"):
            self.send_error(404)
            return
        with open(state) as f:
            util = json.load(f)[which]
        base = 0 if which == "a" else 4
        body = "# HELP %s Ratio of time the graphics engine is active.\n" % metric
        body += "# TYPE %s gauge\n" % metric
        for i, v in enumerate(util):
            body += series(base + i, "research", "dcgm-%s-rollout-%d" % (which, i), v)
        body += series(base + 2, "other", "dcgm-%s-rollout-0" % which, 0)  # not the job's
        body += series(base + 3, "", "", 0)                                # no pod holds it
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def log_message(self, *args):
        pass
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(port_file + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(port_file + ".tmp", port_file)
srv.serve_forever()
PY
k8s_start exporter "$K8S_TMP/exporter.log" python3 "$K8S_TMP/exporter.py" "$K8S_TMP/util.json" \
  "$K8S_TMP/exporter.port" $METRIC
wait_until 10 "the exporter wrote no port" test -s "$K8S_TMP/exporter.port"
EXPORTER=127.0.0.1:$(cat "$K8S_TMP/exporter.port")

# ---- Prometheus: one scrape job per label shape ----------------------------------------------------
k8s_free_port PROM_PORT
PROM=http://127.0.0.1:$PROM_PORT
cat >"$K8S_TMP/prometheus.yml" <<YML
global: {scrape_interval: ${SCRAPE}s, evaluation_interval: ${SCRAPE}s}
scrape_configs:
  - job_name: dcgm-honor
    honor_labels: true
    metrics_path: /a
    scrape_interval: ${SCRAPE}s
    scrape_timeout: ${SCRAPE}s
    static_configs: [{targets: ['$EXPORTER']}]
  - job_name: dcgm-relabelled
    honor_labels: false
    metrics_path: /b
    scrape_interval: ${SCRAPE}s
    scrape_timeout: ${SCRAPE}s
    static_configs:
      - targets: ['$EXPORTER']
        labels: {namespace: gpu-operator, pod: nvidia-dcgm-exporter-7xk2p, container: nvidia-dcgm-exporter}
YML
K8S_STEP="start Prometheus"
k8s_start prometheus "$K8S_TMP/prometheus.log" prometheus \
  --config.file="$K8S_TMP/prometheus.yml" --storage.tsdb.path="$K8S_TMP/tsdb" \
  --web.listen-address="127.0.0.1:$PROM_PORT"
prom_count() {  # SELECTOR -> how many series of the metric match
  curl -fsS "$PROM/api/v1/query" --data-urlencode "query=count($METRIC$1)" |
    python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else 0)'
}
scraped() {
  [[ $(prom_count '{job="dcgm-honor",namespace="research",pod=~"dcgm-a-rollout-.*"}') == 2 &&
    $(prom_count '{job="dcgm-relabelled",exported_namespace="research",exported_pod=~"dcgm-b-rollout-.*"}') == 2 ]]
}
wait_until 60 "Prometheus has not scraped both label shapes" scraped
# The relabel is Prometheus's own: the target's labels took the names, the series' moved aside.
[[ $(prom_count '{job="dcgm-relabelled",pod="nvidia-dcgm-exporter-7xk2p",namespace="gpu-operator"}') == 4 ]] ||
  fail "honor_labels: false did not move the series' pod/namespace to exported_pod/exported_namespace"
k8s_say "Prometheus on $PROM scrapes DCGM series with pod and with exported_pod labels"

k8s_test_operator "$op" --watch-timeout 20 --prometheus-timeout 2 --prometheus-url-allow "$PROM"

# ---- two RLJobs, one per label shape --------------------------------------------------------------
K8S_STEP="kubectl apply of the RLJobs"
rljob() {  # NAME POD_LABEL
  cat <<YAML
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata: {name: $1, namespace: research}
spec:
  model: {preset: micro}
  task: {name: arithmetic-cot}
  algorithm: {type: grpo, steps: 8, promptsPerStep: 16, groupSize: 8, maxResponseTokens: 96}
  roles:
    rollout: {replicas: 2, resources: {limits: {nvidia.com/gpu: "1"}}}
    trainer: {replicas: 1}
  rebalancing:
    enabled: true
    idleBelow: 0.05
    window: ${WINDOW}s
    interval: ${INTERVAL}s
    metric: $METRIC
    podLabel: $2
    prometheusURL: $PROM
    minRolloutReplicas: 1
---
YAML
}
{ rljob dcgm-a pod; rljob dcgm-b exported_pod; } | kc apply -f - >/dev/null
queries_work() { [[ $(cond "rljob/$1" RebalancerDegraded status) == False ]]; }
for j in dcgm-a dcgm-b; do
  wait_until 60 "$j did not turn Running" phase_is rljob/$j Running
  wait_until 30 "$j: RebalancerDegraded did not turn False (the DCGM queries failed)" queries_work $j
done
annotations() {  # JOB -> "0=<assignment> 1=<assignment> "
  local i
  for i in 0 1; do
    printf '%s=%s ' $i "$(kc get pod "$1-rollout-$i" -n research -o 'jsonpath={.metadata.annotations.tlt\.dev/assignment}')"
  done
}

# ---- 1. every rollout pod busy (0.9) for longer than a window: nothing assigned ----------------
K8S_STEP="every rollout pod busy"
sleep $((WINDOW + 2 * INTERVAL))
for j in dcgm-a dcgm-b; do
  [[ $(annotations $j) == "0= 1= " ]] || fail "$j: a busy pod (0.9) was assigned: $(annotations $j)"
done

# ---- 2. rollout-1 of each job idle (0.02) -------------------------------------------------------
K8S_STEP="rollout-1 idle"
set_util 0.9 0.02 0.9 0.02
both_assigned() { [[ $(annotations dcgm-a) == "0= 1=drafter " && $(annotations dcgm-b) == "0= 1=drafter " ]]; }
wait_until $((3 * WINDOW + 10)) "rollout-1 of each job was not assigned" both_assigned
for j in dcgm-a dcgm-b; do
  events $j PodAssignedToDrafter | grep -q "Normal: Pod $j-rollout-1 trains the drafter.*0\.020" ||
    fail "$j: no Event PodAssignedToDrafter for rollout-1 naming 0.020: $(events $j PodAssignedToDrafter)"
  [[ $(cond rljob/$j DrafterAssigned status) == True ]] ||
    fail "$j: condition DrafterAssigned $(cond rljob/$j DrafterAssigned status)"
done
k8s_test_finish "DCGM_FI_PROF_GR_ENGINE_ACTIVE with pod/namespace and with" \
  "exported_pod/exported_namespace (honor_labels: false): busy pods kept, rollout-1 of each assigned"
