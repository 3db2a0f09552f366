#!/usr/bin/env bash
# `bench/rl_e2e.sh --model PATH` at toy size, on the tiny random llama of tests/models/fixtures
# (the bench's own job needs 768 + 512 positions; the tiny model has 128, so --job gives it a
# template of the same form with short responses):
#   - the Amdahl ceiling is printed after the baseline run and before TLT's starts;
#   - one row per step whose ratios are the columns' quotients, the end-to-end and rollout-phase
#     ratios, the share of idle worker-time reclaimed, the acceptance lengths, the phase profile;
#   - the two runs' reward curves and token counts are identical (the bench says True);
#   - bad arguments exit 2 with a message naming the argument.
# Usage: bench_rl_e2e_model.sh TLT_BINARY SOURCE_DIR
set -u
tlt=$1; src=$2
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
export TLT_CACHE=$work/cache  # this test's own drafter warm start
fail() { echo "FAIL: $*"; exit 1; }
cat > "$work/job.yaml" <<'YAML'
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata: {name: rl-bench-tiny}
spec:
  model: {path: MODEL}
  task: {name: arithmetic-cot, seed: 1, heldOut: 0}
  algorithm: {steps: STEPS, promptsPerStep: 2, groupSize: 8, maxResponseTokens: 24,
              learningRate: 1.0e-3, klCoef: 0.01, seed: 0}
  roles: {rollout: {replicas: 2}}
  speculative: {activationThreshold: 4, arms: ["4_1_5", "ngram"]}
  drafter: {vocabSubset: 16, warmStartSteps: 5, training: {batchSize: 8}}
  checkpoint: {path: OUT, everySteps: 0}
  metrics: {port: 0}
YAML

TLT_BIN=$tlt TLT_BENCH_OUT=$work/out "$src/bench/rl_e2e.sh" --model "$src/tests/models/fixtures/tiny-llama-hf" \
  --job "$work/job.yaml" 2 1 > "$work/bench.log" 2>&1 || { cat "$work/bench.log"; fail "bench exited $?"; }
[ -d "$work/out/frozen" ] && fail "the model mode ran the frozen-drafter run"
python3 - "$work/bench.log" <<'PY' || { cat "$work/bench.log"; exit 1; }
import re, sys
text = open(sys.argv[1]).read()
def fail(m): print("FAIL:", m); sys.exit(1)
ceiling = text.find("ceiling (baseline run 1, before TLT's): rollout is")
start_tlt = text.find("rl_e2e: tlt-1 (")
if ceiling < 0 or start_tlt < 0 or not text.find("rl_e2e: baseline-1 (") < ceiling < start_tlt:
    fail("the ceiling is not printed between the baseline run and TLT's")
rows = re.findall(r"^\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+) \|\s+([\d.]+)\s+([\d.]+)\s+([\d.]+) \|"
                  r"\s+(\d+)/(\d+) \|\s+([\d.]+)", text, re.M)
if [int(r[0]) for r in rows] != [1, 2]: fail("rows for steps %s, expected 1 and 2" % [r[0] for r in rows])
for r in rows:
    t, b, ratio, tr, br, rratio = map(float, r[1:7])
    # The columns are rounded to 0.01: so may their quotients be.
    if abs(b / t - ratio) > 0.01 + ratio * (0.006 / t + 0.006 / b) or \
       abs(br / tr - rratio) > 0.01 + rratio * (0.006 / tr + 0.006 / br):
        fail("step %s: ratios %s are not the columns' quotients" % (r[0], r))
m = re.search(r"end-to-end \(fastest of 1 each\): baseline ([\d.]+) s / TLT ([\d.]+) s = ([\d.]+)x "
              r"\(goal >= 1.5x\)", text)
if not m: fail("no end-to-end ratio against the 1.5x goal")
b, t, ratio = map(float, m.groups())  # totals rounded to 0.1 s, the ratio to 0.01
if abs(b / t - ratio) > 0.01 + ratio * (0.06 / t + 0.06 / b):
    fail("end-to-end ratio %.2f is not %.1f / %.1f" % (ratio, b, t))
if not re.search(r"^rollout phase: baseline [\d.]+ s / TLT [\d.]+ s = [\d.]+x", text, re.M):
    fail("no rollout-phase ratio")
m = re.search(r"idle worker-time reclaimed by drafter training: [\d.]+ of [\d.]+ worker-s = ([\d.]+)% "
              r"\(goal >= 95%\)", text)
if not m or not 0 <= float(m.group(1)) <= 100: fail("no reclaimed share against the 95% goal")
if "reward curves identical (lossless, seeded): True (generated token counts and lengths identical: True)" not in text:
    fail("TLT's and the baseline's rollouts differ")
if not re.search(r"^acceptance length \(TLT, tokens per verification\): [\d.]+, [\d.]+; mean", text, re.M):
    fail("no acceptance lengths")
if not re.search(r"^generating worker-s by phase \(TLT / baseline\): .*plain", text, re.M):
    fail("no phase profile")
if not re.search(r"^bandit choices \(TLT\): step 1: .*; step 2: ", text, re.M):
    fail("no bandit choices per step")
print("bench rl_e2e --model: ceiling first, 2 steps, " + re.search(r"end-to-end.*", text).group(0))
PY

# bad ARGS... EXPECTED_TEXT: exit 2 with a message that says what is wrong.
bad() {
  local want=${*: -1}; set -- "${@:1:$#-1}"
  TLT_BIN=$tlt "$src/bench/rl_e2e.sh" "$@" > "$work/bad.log" 2>&1; rc=$?
  [ "$rc" = 2 ] || { cat "$work/bad.log"; fail "'$*' exited $rc, expected 2"; }
  grep -qF -- "$want" "$work/bad.log" || { cat "$work/bad.log"; fail "'$*' did not say '$want'"; }
}
bad --model "--model needs a path"
bad --model "$work/no-such-model" "no-such-model: no such file or directory"
bad --model "$src/tests/models/fixtures/tiny-llama-hf" x "STEPS must be a positive integer (got 'x')"
bad --model "$src/tests/models/fixtures/tiny-llama-hf" 1 0 "REPEATS must be a positive integer (got '0')"
bad --modle x "unknown option --modle"
echo "bench rl_e2e: bad arguments refused with exit 2"
