#!/usr/bin/env bash
# `tlt run` of a short RLJob end to end, with its faults:
#   1. an uninterrupted run writes a report (steps, timeline, pictures, metrics snapshot);
#   2. --baseline produces the very same rollouts and rewards (speculation is lossless and
#      sampling is seeded per request), only without drafting and drafter training;
#   3. SIGTERM mid-run checkpoints and exits 0; --resume finishes with the same steps as (1);
#   4. a rollout worker SIGKILLed mid-step is restarted and the step's results are unchanged;
#   5. a corrupt checkpoint is refused with a clear error.
# Usage: rl_run.sh TLT_BINARY SOURCE_DIR
set -u
tlt=$1; src=$2
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
job() {  # job NAME -> a manifest with its own checkpoint directory and metrics port
  sed -e "s|PLACEHOLDER|$work/$1|" -e "s|METRICSPORT|$(port)|" \
    "$src/tests/manifests/e2e/rl-e2e.yaml" > "$work/$1.yaml"
}
fail() { echo "FAIL: $*"; exit 1; }
# Each run is bounded well inside ctest's timeout: a hung run fails here, with its log and the
# processes still alive, instead of timing the whole test out silently.
bounded() {  # bounded LOG CMD... ; exit status of CMD, or 124 after 240 s
  "${@:2}" & local pid=$! waited=0
  while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt 480 ]; do sleep 0.5; waited=$((waited + 1)); done
  if kill -0 "$pid" 2>/dev/null; then
    echo "HUNG after 240 s: ${*:2}"; tail -30 "$1"; ps -eo pid,ppid,stat,etime,pcpu,nlwp,args | grep '[t]lt'
    if command -v gdb >/dev/null; then  # where each thread is: the diagnosis a CI log needs
      timeout 60 gdb -p "$pid" -batch -ex "thread apply all bt 10" 2>&1 | grep -E '^(Thread|#)' | head -150
    fi
    kill -9 "$pid"; wait "$pid" 2>/dev/null; return 124
  fi
  wait "$pid"
}

job full
TLT_RUN_SCRATCH=job bounded "$work/full.log" "$tlt" run "$work/full.yaml" > "$work/full.log" 2>&1 || { rc=$?; cat "$work/full.log"; fail "tlt run exited $rc"; }
job base
bounded "$work/base.log" "$tlt" run "$work/base.yaml" --baseline > "$work/base.log" 2>&1 || { rc=$?; cat "$work/base.log"; fail "--baseline exited $rc"; }
python3 - "$work" <<'PY' || exit 1
import json, os, sys
w = sys.argv[1]
def fail(m): print("FAIL:", m); sys.exit(1)
full = json.load(open(w + "/full/report/tlt.json"))
base = json.load(open(w + "/base/report/baseline.json"))
if len(full["steps"]) != 4: fail("expected 4 steps, got %d" % len(full["steps"]))
# The run directory keeps only the policy version the workers load next (a real model's is
# hundreds of MB per step), and each step reports how long publishing it took. The full run
# keeps it in the job's directory (TLT_RUN_SCRATCH=job); the baseline's default scratch, in
# memory where /dev/shm has room, is gone after the run.
kept = sorted(f for f in os.listdir(w + "/full/tlt/run") if f.startswith("policy-v"))
if kept != ["policy-v4.ckpt"]: fail("policy versions left in the run directory: %s" % kept)
scratch = [l.split()[2] for l in open(w + "/base.log") if l.startswith("baseline: scratch ")]
if len(scratch) != 1: fail("the baseline's log does not name its scratch directory once")
if scratch[0].startswith("/dev/shm/") and os.path.exists(scratch[0]):
    fail("the in-memory scratch %s outlived the run" % scratch[0])
if not all(s["publishSeconds"] > 0 for s in full["steps"]): fail("a step without publishSeconds")
if not all(s["updatePositions"] > 0 and s["updateMicrobatches"] > 0 for s in full["steps"]):
    fail("a step without updatePositions / updateMicrobatches")
keys = ["rewardMean", "responseTokens", "rolloutSeconds", "updateSeconds", "idleWorkerSeconds",
        "reclaimedWorkerSeconds", "acceptLength", "arms", "timeline", "drafterVersion"]
for s in full["steps"]:
    for k in keys:
        if k not in s: fail("step %d lacks %s" % (s["step"], k))
    states = {i["state"] for i in s["timeline"]}
    if "generating" not in states: fail("timeline of step %d: %s" % (s["step"], states))
if not any(s["drafterSteps"] > 0 for s in full["steps"]): fail("the drafter never trained")
if full["steps"][-1]["drafterVersion"] < 1: fail("no new drafter version was pushed")
if full["reclaimedWorkerSeconds"] <= 0: fail("no idle worker time was reclaimed")
if not any(s["acceptLength"] > 1 for s in full["steps"]): fail("speculation never ran")
# spec.speculative.selector.pooled (default on): from step 2 on each worker's bandit counts the
# other's steps of the step before; nothing in step 1, and nothing in the baseline.
pooled = [s["banditStepsAbsorbed"] for s in full["steps"]]
if pooled[0] != 0 or not any(p > 0 for p in pooled[1:]):
    fail("bandit steps absorbed by step %s; expected 0 in step 1, then some" % pooled)
# spec.drafter.vocabSubset 48: from step 2 on (step 1 has no generated tokens to rank yet)
# every worker that speculated drafted over 48 tokens, and the rollouts still equal the baseline.
vocab = [s["draftVocabulary"] for s in full["steps"]]
if not any(v == 48 for v in vocab[1:]) or any(v not in (0, 48) for v in vocab[1:]):
    fail("draft vocabulary by step %s; expected 48 after step 1" % vocab)
for s in base["steps"]:
    if s["drafterSteps"] != 0 or s["acceptLength"] != 0 or s["banditStepsAbsorbed"] != 0:
        fail("baseline drafted, trained or pooled bandit steps: %s" % s)
# Lossless and seeded: the same responses, hence the same rewards, lengths and token counts.
for a, b in zip(full["steps"], base["steps"]):
    for k in ("rewardMean", "responseTokens", "tokens"):
        if a[k] != b[k]: fail("step %d %s differs: TLT %s vs baseline %s" % (a["step"], k, a[k], b[k]))
for f in ("report.json", "timeline-tlt.svg", "steps.svg", "metrics.prom"):
    if not os.path.getsize(w + "/full/report/" + f): fail("empty " + f)
prom = open(w + "/full/report/metrics.prom").read()
for line in ('tlt_rl_step{job="rl-e2e"} 4', "tlt_drafter_version", "tlt_reclaimed_seconds_total",
             'tlt_worker_state{job="rl-e2e",pod="rl-e2e-rollout-0",role="rollout",state="idle"} 1'):
    if line not in prom: fail("metrics.prom lacks " + line)
print("rl e2e: 4 steps, TLT and baseline rollouts identical; reclaimed %.2f of %.2f idle worker-s" %
      (full["reclaimedWorkerSeconds"], full["reclaimedWorkerSeconds"] + full["idleWorkerSeconds"]))
PY
if command -v promtool >/dev/null; then
  promtool check metrics < "$work/full/report/metrics.prom" || fail "promtool rejects metrics.prom"
fi

# SIGTERM: checkpoint and exit 0, then --resume reproduces the remaining steps.
job term
"$tlt" run "$work/term.yaml" > "$work/term.log" 2>&1 &
pid=$!
# Wait for step 2 (on a loaded 2-core CI machine it has taken over 60 s, and a SIGTERM before
# step 1 ends leaves nothing to resume), then stop the run in step 3.
for _ in $(seq 2400); do grep -q "step=2/4" "$work/term.log" && break; sleep 0.1; done
grep -q "step=2/4" "$work/term.log" || { cat "$work/term.log"; kill -KILL "$pid"; fail "step 2 did not finish in 240 s"; }
kill -TERM "$pid"
for _ in $(seq 1200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$pid" 2>/dev/null; then
  echo "HUNG: tlt run still alive 120 s after SIGTERM"; tail -30 "$work/term.log"
  ps -eo pid,ppid,stat,etime,pcpu,args | grep '[t]lt'; pkill -KILL -P "$pid"; kill -KILL "$pid"
  fail "SIGTERM did not end the run"
fi
wait "$pid"; rc=$?
[ "$rc" = 0 ] || { cat "$work/term.log"; fail "SIGTERM exit code $rc"; }
grep -q "stopped by signal after step" "$work/term.log" || grep -q "step=4/4" "$work/term.log" || { cat "$work/term.log"; fail "no stop message"; }
bounded "$work/resume.log" "$tlt" run "$work/term.yaml" --resume > "$work/resume.log" 2>&1
rc=$?; [ "$rc" = 0 ] || { cat "$work/term.log" "$work/resume.log"; fail "--resume exited $rc"; }
grep -q "resumed from" "$work/resume.log" || { cat "$work/resume.log"; fail "--resume did not resume"; }

# A rollout worker killed in the middle of step 2 is restarted; the step completes unchanged.
job kill
TLT_FAULT_KILL_WORKER=2 bounded "$work/kill.log" "$tlt" run "$work/kill.yaml" > "$work/kill.log" 2>&1 || { rc=$?; cat "$work/kill.log"; fail "run with a killed worker exited $rc"; }
grep -q "died" "$work/kill.log" || { cat "$work/kill.log"; fail "the worker was not killed"; }
python3 - "$work" <<'PY' || exit 1
import json, sys
w = sys.argv[1]
def fail(m): print("FAIL:", m); sys.exit(1)
full = json.load(open(w + "/full/report/tlt.json"))["steps"]
for name in ("term", "kill"):
    other = json.load(open(w + "/%s/report/tlt.json" % name))["steps"]
    if [s["step"] for s in other] != [1, 2, 3, 4]: fail("%s: steps %s" % (name, [s["step"] for s in other]))
    for a, b in zip(full, other):
        for k in ("rewardMean", "responseTokens", "tokens"):
            if a[k] != b[k]: fail("%s step %d %s: %s vs uninterrupted %s" % (name, a["step"], k, b[k], a[k]))
kill = json.load(open(w + "/kill/report/tlt.json"))["steps"]
if kill[1]["restarts"] != 1: fail("step 2 restarts = %s" % kill[1]["restarts"])
print("rl e2e: SIGTERM + --resume and a killed worker reproduce the uninterrupted steps")
PY

# A damaged checkpoint is refused, naming the file.
latest=$(cat "$work/kill/tlt/latest")
printf 'garbage' > "$work/kill/tlt/$latest/policy.ckpt"
if "$tlt" run "$work/kill.yaml" --resume > "$work/corrupt.log" 2>&1; then fail "corrupt checkpoint accepted"; fi
grep -q "policy.ckpt.*not a tlt checkpoint" "$work/corrupt.log" || { cat "$work/corrupt.log"; fail "no clear error"; }
echo "rl e2e: corrupt checkpoint refused"
