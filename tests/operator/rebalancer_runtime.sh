#!/usr/bin/env bash
# The reclamation loop closed, every part real: etcd + kube-apiserver with kwok (the RLJob's pods),
# the real tlt-operator (least-privilege RBAC of tests/operator/rbac.yaml) with its rebalancer
# pointed at Debian's Prometheus, and a real `tlt run --attach` of the same RLJob standing in for
# its pods: its workers' metrics carry the pods' names and Prometheus scrapes them.
# The job has 3 rollout workers, 2 prompts per step and minIdleWorkers 3: worker 2 gets no
# requests and, unable to train alone, sits idle (tlt_gpu_busy_ratio 0). Then:
#   1. the rebalancer annotates pod <job>-rollout-2 with tlt.dev/assignment=drafter;
#   2. the run takes it at the next step boundary: worker 2 trains the drafter through the
#      rollout phase (its log says so; tlt_drafter_assigned{pod=<job>-rollout-2} is 1 on the
#      run's /metrics and in Prometheus; the step reports list worker 2 in drafterWorkers and
#      reclaimed worker-seconds grow);
#   3. the run's progress reaches <job>-trainer-0's tlt.dev/progress annotation;
#   4. SIGTERM: the run checkpoints and exits 0;
#   5. dashboards/render draws the idle-GPU reclamation dashboard and the operator dashboard from
#      this Prometheus (the run's and the operator's metrics): every panel has data.
# Stops every process it started (by PID) on exit. Last line: PASS or FAIL.
# Usage: rebalancer_runtime.sh TLT_BINARY TLT_OPERATOR_BINARY SOURCE_DIR   (K8S_BIN=DIR, KEEP=1)
set -euo pipefail
tlt=$1
op=$2
src=$(cd "$3" && pwd)
source "$src/scripts/k8s-env.sh"

WINDOW=6 INTERVAL=2 SCRAPE=1 JOB=rbrt
k8s_test_begin rebalancer_runtime prometheus kwok
K8S_FAIL_LOGS="operator prometheus run kwok"
# (wait_until: K8S_WATCH_PID is the run, once it starts: its exit fails the test too.)

k8s_start_gpu_node
k8s_install_operator

# ---- Prometheus: the run's /metrics and the operator's --------------------------------------------
k8s_free_port RUN_PORT
k8s_free_port OP_PORT
k8s_free_port PROM_PORT
PROM=http://127.0.0.1:$PROM_PORT
cat >"$K8S_TMP/prometheus.yml" <<YML
global: {scrape_interval: ${SCRAPE}s, evaluation_interval: ${SCRAPE}s}
scrape_configs:
  - job_name: tlt
    honor_labels: true
    scrape_interval: ${SCRAPE}s
    scrape_timeout: ${SCRAPE}s
    static_configs:
      - targets: ['127.0.0.1:$RUN_PORT', '127.0.0.1:$OP_PORT']
        labels: {namespace: research}
YML
K8S_STEP="start Prometheus"
k8s_start prometheus "$K8S_TMP/prometheus.log" prometheus \
  --config.file="$K8S_TMP/prometheus.yml" --storage.tsdb.path="$K8S_TMP/tsdb" \
  --web.listen-address="127.0.0.1:$PROM_PORT"
wait_until 30 "Prometheus not ready" curl -fsS "$PROM/-/ready"

# ---- the operator, in-cluster style --------------------------------------------------------------
k8s_start_operator "$op" "$OP_PORT" --watch-timeout 20 --prometheus-timeout 2 \
  --prometheus-url-allow "$PROM"  # the job names this Prometheus: the admin allows it

# ---- the RLJob: applied to the cluster, and run here standing in for its pods --------------------
# Model, task and warm start as tests/manifests/e2e/rl-e2e.yaml, so the cached warm start serves.
cat >"$K8S_TMP/job.yaml" <<YAML
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata: {name: $JOB, namespace: research}
spec:
  model: {preset: micro}
  task: {name: arithmetic-cot, seed: 1, heldOut: 64}
  algorithm: {steps: 400, promptsPerStep: 2, groupSize: 4, maxResponseTokens: 96,
              learningRate: 3.0e-5, klCoef: 0.01, seed: 0}
  roles:
    rollout: {replicas: 3, resources: {limits: {nvidia.com/gpu: "1"}}}
    trainer: {replicas: 1}
  speculative: {activationThreshold: 8, arms: ["4_1_5", "ngram"]}
  drafter: {training: {batchSize: 8, minIdleWorkers: 3}}
  rebalancing:
    enabled: true
    idleBelow: 0.05
    window: ${WINDOW}s
    interval: ${INTERVAL}s
    metric: tlt_gpu_busy_ratio
    podLabel: pod
    prometheusURL: $PROM
    minRolloutReplicas: 1
  checkpoint: {path: $K8S_TMP/ckpt}
  metrics: {port: $RUN_PORT}
YAML
K8S_STEP="kubectl apply of the RLJob"
kc apply -f "$K8S_TMP/job.yaml" >/dev/null
phase_is() { [[ $(kc get rljob $JOB -n research -o 'jsonpath={.status.phase}') == "$1" ]]; }
wait_until 60 "the RLJob did not turn Running" phase_is Running
annotation() {  # POD KEY
  kc get pod "$1" -n research -o "jsonpath={.metadata.annotations.tlt\.dev/$2}"
}
K8S_STEP="start tlt run --attach"
k8s_start run "$K8S_TMP/run.log" "$tlt" run "$K8S_TMP/job.yaml" --attach research \
  --kubeconfig "$KUBECONFIG"
RUN_PID=$K8S_LAST_PID
K8S_WATCH_PID=$RUN_PID
START=$SECONDS
RUN_START_EPOCH=$(date +%s)
wait_until 60 "the run did not attach" grep -q "attached to RLJob research/$JOB" "$K8S_TMP/run.log"
wait_until 120 "the run's first step did not finish" grep -q "step=1/" "$K8S_TMP/run.log"

# ---- 1. the idle worker's pod is assigned ---------------------------------------------------------
K8S_STEP="worker 2 idle: assignment"
assigned() { [[ $(annotation $JOB-rollout-2 assignment) == drafter ]]; }
wait_until 90 "pod $JOB-rollout-2 was not assigned to the drafter" assigned
ASSIGNED=$((SECONDS - START))
for i in 0 1; do
  [[ -z $(annotation $JOB-rollout-$i assignment) ]] || fail "busy pod $JOB-rollout-$i was assigned"
done
k8s_say "pod $JOB-rollout-2 assigned to drafter training ${ASSIGNED} s after the run started"

# ---- 2. the run takes it at a step boundary ---------------------------------------------------------
K8S_STEP="the run takes the assignment"
wait_until 60 "the run did not log the assignment" \
  grep -q "workers dedicated to drafter training by the rebalancer: 2" "$K8S_TMP/run.log"
run_metric() {  # (not `curl | grep -q`: under pipefail an early grep exit fails curl)
  curl -fsS "http://127.0.0.1:$RUN_PORT/metrics" >"$K8S_TMP/run.metrics" && grep -qF "$1" "$K8S_TMP/run.metrics"
}
wait_until 30 "tlt_drafter_assigned is not 1 on the run's /metrics" \
  run_metric "tlt_drafter_assigned{job=\"$JOB\",pod=\"$JOB-rollout-2\"} 1"
run_metric "tlt_drafter_assigned{job=\"$JOB\",pod=\"$JOB-rollout-0\"} 0" ||
  fail "worker 0 shows as assigned"
prom_assigned() {
  [[ $(curl -fsS "$PROM/api/v1/query" --data-urlencode \
    "query=max(tlt_drafter_assigned{job=\"$JOB\",pod=\"$JOB-rollout-2\"})" |
    python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")') == 1 ]]
}
wait_until 30 "Prometheus does not show tlt_drafter_assigned 1" prom_assigned

# ---- 3. progress on the trainer pod ---------------------------------------------------------------
K8S_STEP="progress annotation"
progress_step() {
  annotation $JOB-trainer-0 progress | python3 -c 'import json,sys; print(json.load(sys.stdin)["step"])'
}
wait_until 30 "no tlt.dev/progress on $JOB-trainer-0" progress_step
P1=$(progress_step)
progress_advanced() { (($(progress_step) > P1)); }  # a step takes 0.5-5 s, longer under load
wait_until 30 "tlt.dev/progress did not advance past step $P1" progress_advanced
P2=$(progress_step)
k8s_say "tlt.dev/progress on $JOB-trainer-0: $(annotation $JOB-trainer-0 progress)"

# ---- 4. SIGTERM: checkpoint and exit 0 ------------------------------------------------------------
K8S_STEP="SIGTERM"
K8S_WATCH_PID=""
RUN_END_EPOCH=$(date +%s)  # the dashboard is drawn up to here: afterwards the run's series are stale
kill -TERM "$RUN_PID"
RC=0
wait "$RUN_PID" || RC=$?
((RC == 0)) || fail "tlt run exited $RC after SIGTERM"
grep -q "stopped by signal" "$K8S_TMP/run.log" || fail "no checkpoint line after SIGTERM"
python3 - "$K8S_TMP/ckpt/report/tlt.json" <<'PY' || fail "the report does not show worker 2 training the drafter"
import json, sys
steps = json.load(open(sys.argv[1]))["steps"]
dedicated = [s for s in steps if 2 in s.get("drafterWorkers", [])]
assert dedicated, "no step with worker 2 in drafterWorkers"
before = [s for s in steps if 2 not in s.get("drafterWorkers", [])]
reclaimed_after = sum(s["reclaimedWorkerSeconds"] for s in dedicated) / len(dedicated)
reclaimed_before = sum(s["reclaimedWorkerSeconds"] for s in before) / max(1, len(before))
print("steps with worker 2 dedicated: %d of %d; reclaimed worker-seconds per step %.3f before, %.3f after"
      % (len(dedicated), len(steps), reclaimed_before, reclaimed_after))
assert reclaimed_after > reclaimed_before, "dedicating worker 2 reclaimed nothing"
PY
# ---- 5. the main and operator dashboards drawn from this Prometheus: every panel has data ------
# (TLT_DASHBOARD_PNG=FILE keeps the picture: the README's is made this way.)
K8S_STEP="render the idle-GPU reclamation dashboard"
if [[ -d "$src/dashboards/render/node_modules" ]] && command -v chromium >/dev/null 2>&1; then
  node "$src/dashboards/render/render.mjs" --prometheus "$PROM" \
    --dashboard "$src/dashboards/tlt-idle-gpu-reclamation.json" --from "$RUN_START_EPOCH" --to "$RUN_END_EPOCH" \
    --var namespace=research --var job=$JOB --scrape-interval ${SCRAPE}s --width 1600 \
    --out "${TLT_DASHBOARD_PNG:-$K8S_TMP/idle-gpu-reclamation.png}" --require-data \
    >"$K8S_TMP/render.log" 2>&1 || { cat "$K8S_TMP/render.log"; fail "a panel of the main dashboard has no data"; }
  node "$src/dashboards/render/render.mjs" --prometheus "$PROM" \
    --dashboard "$src/dashboards/tlt-operator.json" --from "$RUN_START_EPOCH" --to "$RUN_END_EPOCH" \
    --var job=$JOB --scrape-interval ${SCRAPE}s --width 1600 \
    --out "$K8S_TMP/operator.png" --require-data \
    >"$K8S_TMP/render-operator.log" 2>&1 || { cat "$K8S_TMP/render-operator.log"; fail "a panel of the operator dashboard has no data"; }
  RENDERED="; every panel of the main and operator dashboards has data"
else
  fail "dashboards/render is not installed (scripts/setup.sh installs chromium and its npm packages)"
fi
k8s_test_finish "idle worker's pod assigned ${ASSIGNED} s after the run started (window" \
  "${WINDOW} s, interval ${INTERVAL} s, scrape ${SCRAPE} s); taken by the run at a step boundary," \
  "visible on /metrics and in Prometheus; progress $P2 on the trainer pod$RENDERED"
