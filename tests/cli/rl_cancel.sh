#!/usr/bin/env bash
# SIGTERM is a cancel point inside a long policy warm start, not only at step boundaries: the run
# stops within a few seconds, exits 0, says where it stopped, and caches no half-trained warm
# start (a rerun trains it again from the start).
# Usage: rl_cancel.sh TLT_BINARY
set -u
tlt=$1
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
export TLT_CACHE=$work/cache  # this test's own warm start, never a cached one
fail() { echo "FAIL: $*"; exit 1; }
cat > "$work/job.yaml" <<YAML
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata: {name: rl-cancel}
spec:
  model: {preset: micro}
  task: {name: arithmetic-cot, seed: 1, heldOut: 8}
  algorithm: {steps: 2, promptsPerStep: 4, groupSize: 4, maxResponseTokens: 32,
              warmStartSteps: 1000000, seed: 0}
  roles: {rollout: {replicas: 1}}
  checkpoint: {path: $work/ckpt, everySteps: 1}
  metrics: {port: 0}
YAML
"$tlt" run "$work/job.yaml" --baseline > "$work/run.log" 2>&1 &
pid=$!
# Wait for the warm start to be under way (a line every 100 steps when not on a terminal).
for _ in $(seq 1200); do grep -q "warm start step 100 " "$work/run.log" && break; sleep 0.1; done
grep -q "warm start step 100 " "$work/run.log" || { kill -KILL "$pid"; cat "$work/run.log"; fail "no warm-start progress in 120 s"; }
kill -TERM "$pid"
sent=$(date +%s.%N)
for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
if kill -0 "$pid" 2>/dev/null; then
  kill -KILL "$pid"; cat "$work/run.log"; fail "still running 15 s after SIGTERM"
fi
wait "$pid"; rc=$?
took=$(python3 -c "import time; print('%.1f' % (time.time() - $sent))")
[ "$rc" = 0 ] || { cat "$work/run.log"; fail "exit code $rc after SIGTERM"; }
grep -q "stopped during the policy's warm start" "$work/run.log" || { cat "$work/run.log"; fail "no message saying where it stopped"; }
grep -q "stopped by signal before step 1 finished" "$work/run.log" || { cat "$work/run.log"; fail "no stop line"; }
python3 -c "import sys; sys.exit(0 if $took < 5 else 1)" || { cat "$work/run.log"; fail "took $took s to stop (bound: 5 s)"; }
if ls "$TLT_CACHE"/rl/warm-start-*.ckpt >/dev/null 2>&1; then fail "a half-trained warm start was cached"; fi
echo "rl cancel: SIGTERM during the warm start stopped the run in $took s, exit 0, nothing cached"
