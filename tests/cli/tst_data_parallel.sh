#!/usr/bin/env bash
# Data-parallel TSTPretrainJob (spec.workers.replicas: 2) end to end:
#   1. `tlt run` with 2 replicas (a worker process of tlt, a file store, Gloo over 127.0.0.1)
#      finishes with no socket listening beyond loopback, and its final held-out loss equals the
#      1-replica run's (printed); only rank 0 wrote the report.
#   2. The cluster path: two `tlt run-role` processes (TLT_INDEX 0 and 1, rank 0 hosting the
#      rendezvous on TLT_RENDEZVOUS_PORT) give the same loss.
#   3. A worker killed mid-run fails `tlt run` quickly, with an error naming the worker.
# Usage: tst_data_parallel.sh TLT_BINARY SOURCE_DIR
set -u
tlt=$1; src=$2
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
job() {  # job NAME REPLICAS [STEPS]: a copy of the e2e job
  sed -e "s|PLACEHOLDER|$work/$1|" -e "s|^    steps: 24$|    steps: ${3:-24}|" \
    "$src/tests/manifests/e2e/tst-e2e.yaml" > "$work/$1.yaml"
  printf '  workers: {replicas: %s}\n' "$2" >> "$work/$1.yaml"
}
final_loss() {
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["tst"][-1]["heldOutLoss"])' "$1"
}

# 1. One replica against two.
job one 1; job two 2
"$tlt" --threads 1 run "$work/one.yaml" > "$work/one.log" 2>&1 || { rc=$?; cat "$work/one.log"; fail "1 replica exited $rc"; }
# The local group meets at a file store and Gloo binds loopback: nothing of the run but /metrics
# (spec.metrics.port, 9400 by default) may listen beyond 127.0.0.1 (listeners.py exits 3 when the
# process tree ever does).
python3 "$src/tests/cli/listeners.py" --allow-port 9400 "$tlt" run "$work/two.yaml" > "$work/two.log" 2>&1 ||
  { rc=$?; cat "$work/two.log"; fail "2 replicas exited $rc (3: a socket listened beyond loopback)"; }
grep -q "data parallel over 2 ranks" "$work/two.log" || { cat "$work/two.log"; fail "no data parallelism reported"; }
grep -q "worker 1 done" "$work/two/workers/worker-1.log" || fail "worker 1 did not finish: $(cat "$work/two/workers/worker-1.log")"
[ "$(ls "$work/two")" = "$(printf 'report\ntst\nworkers')" ] || fail "unexpected files: $(ls "$work/two")"
one=$(final_loss "$work/one/report/report.json"); two=$(final_loss "$work/two/report/report.json")
echo "tst data parallel: final held-out loss 1 replica $one, 2 replicas $two"
python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if abs(a - b) < 1e-3 else 1)" "$one" "$two" ||
  fail "2 replicas' loss $two differs from 1 replica's $one"

# 2. The pods' path: rank 0 hosts the rendezvous on a fixed port, rank 1 connects to it.
job pods 2
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
for i in 1 0; do
  TLT_JOB_FILE="$work/pods.yaml" TLT_ROLE=worker TLT_INDEX=$i TLT_RENDEZVOUS_PORT=$port \
    TLT_RENDEZVOUS_ADDRESS=127.0.0.1 TLT_THREADS=1 "$tlt" run-role > "$work/pod$i.log" 2>&1 &
  eval "pid$i=$!"
done
wait "$pid0" || { rc=$?; cat "$work/pod0.log" "$work/pod1.log"; fail "run-role rank 0 exited $rc"; }
wait "$pid1" || { rc=$?; cat "$work/pod1.log"; fail "run-role rank 1 exited $rc"; }
pods=$(final_loss "$work/pods/report/report.json")
echo "tst data parallel: run-role pods (2 ranks) final held-out loss $pods"
python3 -c "import sys; sys.exit(0 if abs(float(sys.argv[1]) - float(sys.argv[2])) < 1e-3 else 1)" "$one" "$pods" ||
  fail "run-role loss $pods differs from 1 replica's $one"

# 3. A worker that dies fails the run (no hang) with an error naming it.
job dies 2 4000
"$tlt" run "$work/dies.yaml" > "$work/dies.log" 2>&1 &
parent=$!
for _ in $(seq 1 600); do
  grep -q "step=" "$work/dies.log" 2>/dev/null && break
  sleep 0.1
done
worker=$(pgrep -P "$parent" | head -1)
[ -n "$worker" ] || { cat "$work/dies.log"; fail "no worker process under tlt $parent"; }
kill -9 "$worker"
start=$(date +%s)
for _ in $(seq 1 600); do kill -0 "$parent" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$parent" 2>/dev/null; then kill -9 "$parent"; fail "tlt run still running 60 s after its worker died"; fi
wait "$parent" && fail "tlt run succeeded although its worker died"
grep -q "data-parallel worker 1 (pid $worker) was killed by signal 9" "$work/dies.log" ||
  { cat "$work/dies.log"; fail "no error naming the dead worker"; }
echo "tst data parallel: killed worker failed the run in $(( $(date +%s) - start )) s: $(grep -m1 'Connection closed\|failed' "$work/dies.log" | cut -c1-160)"

# 3. In a pod (no TLT_RENDEZVOUS_ADDRESS), rank 1 finds rank 0 by the operator's pod name,
#    <job>-workers-0.<TLT_SERVICE> (operator/controller/desired.h), never <job>-worker-0.
TLT_JOB_FILE="$work/pods.yaml" TLT_ROLE=workers TLT_INDEX=1 TLT_RENDEZVOUS_PORT=$port \
  TLT_SERVICE=svc.invalid TLT_THREADS=1 timeout 10 "$tlt" run-role > "$work/lookup.log" 2>&1 || true
grep -q "tst-e2e-workers-0\.svc\.invalid" "$work/lookup.log" ||
  fail "rank 1 did not look up tst-e2e-workers-0.svc.invalid: $(tail -3 "$work/lookup.log")"
echo "tst data parallel: rank 1 looks up rank 0 as tst-e2e-workers-0.<TLT_SERVICE>"
