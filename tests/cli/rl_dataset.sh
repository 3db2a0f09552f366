#!/usr/bin/env bash
# spec.task.dataset end to end through `tlt run` (issue 39): a 2-step RLJob of the tiny Hugging
# Face llama of tests/models/fixtures on a JSONL dataset (tests/dataset/arith.jsonl) and on a
# Parquet one in verl's layout (chat-message prompts, reward_model.ground_truth); and bad
# datasets refused before any training, with nothing written (no checkpoint, no report).
# Usage: rl_dataset.sh TLT_BINARY SOURCE_DIR
set -u
tlt=$1; src=$2
fx=$src/tests/models/fixtures
data=$src/tests/dataset
work=${KEEP_WORK:-$(mktemp -d)}; [ -n "${KEEP_WORK:-}" ] || trap 'rm -rf "$work"' EXIT
export TLT_CACHE=$work/cache
fail() { echo "FAIL: $*"; exit 1; }

# manifest NAME DATASET_LINES > FILE
manifest() {
  cat <<YAML
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata: {name: $1}
spec:
  model: {path: $fx/tiny-llama-hf}
  task:
    seed: 3
    dataset: {$2}
  reward: {type: math}
  algorithm: {steps: 2, promptsPerStep: 4, groupSize: 2, maxResponseTokens: 16,
              learningRate: 1.0e-3, klCoef: 0.01, seed: 0}
  roles: {rollout: {replicas: 1}}
  drafter: {warmStartSteps: 0}
  checkpoint: {path: $work/$1, everySteps: 1}
  metrics: {port: 0}
YAML
}

manifest jsonl "path: $data/arith.jsonl, heldOut: 4" > "$work/jsonl.yaml"
"$tlt" run "$work/jsonl.yaml" > "$work/jsonl.log" 2>&1 || { cat "$work/jsonl.log"; fail "tlt run (JSONL) exited $?"; }
grep -q "dataset: $data/arith.jsonl: 8 training rows, 4 held out; prompts skipped 0, truncated 0" "$work/jsonl.log" ||
  { cat "$work/jsonl.log"; fail "the dataset line is missing"; }
manifest parquet "path: $data/verl.parquet, answerField: reward_model.ground_truth, heldOut: 2" > "$work/parquet.yaml"
"$tlt" run "$work/parquet.yaml" > "$work/parquet.log" 2>&1 || { cat "$work/parquet.log"; fail "tlt run (Parquet) exited $?"; }
grep -q "dataset: $data/verl.parquet: 6 training rows, 2 held out" "$work/parquet.log" ||
  { cat "$work/parquet.log"; fail "the Parquet dataset line is missing"; }
python3 - "$work" <<'PY' || exit 1
import json, sys
w = sys.argv[1]
for name in ("jsonl", "parquet"):
    steps = json.load(open("%s/%s/report/tlt.json" % (w, name)))["steps"]
    if len(steps) != 2: print("FAIL: %s: expected 2 steps, got %d" % (name, len(steps))); sys.exit(1)
    summary = json.load(open("%s/%s/report/report.json" % (w, name)))["tlt"]
    if summary.get("promptsSkipped") != 0 or summary.get("promptsTruncated") != 0:
        print("FAIL: %s: report.json does not count long prompts: %s" % (name, summary)); sys.exit(1)
PY

# refused NAME DATASET_LINES PATTERN: the run fails naming PATTERN and writes no checkpoint.
refused() {
  manifest "$1" "$2" > "$work/$1.yaml"
  if "$tlt" run "$work/$1.yaml" > "$work/$1.log" 2>&1; then cat "$work/$1.log"; fail "$1: the run succeeded"; fi
  grep -q -- "$3" "$work/$1.log" || { cat "$work/$1.log"; fail "$1: the error does not say: $3"; }
  # Nothing written: no checkpoint, no report (a scratch directory outside /dev/shm may remain).
  [ -z "$(find "$work/$1" \( -name 'step-*' -o -name 'report*' -o -name '*.ckpt' \) 2>/dev/null)" ] ||
    { find "$work/$1"; fail "$1: a checkpoint or a report was written"; }
}
printf '{"prompt": "1 + 1?", "answer": "2"}\n{"prompt": "2 + 2?", "answer": \n' > "$work/bad.jsonl"
refused malformed "path: $work/bad.jsonl, heldOut: 1" "bad.jsonl:2: not valid JSON"
refused field "path: $data/arith.jsonl, answerField: solution" "spec.task.dataset.answerField: $data/arith.jsonl:1: the row has no field \"solution\""
refused schema "path: $data/wrong_schema.parquet" "spec.task.dataset.promptField: $data/wrong_schema.parquet: row 1: the row has no field"
refused heldout "path: $data/arith.jsonl, heldOut: 12" "spec.task.dataset.heldOut: 12 rows held out"
: > "$work/empty.jsonl"
refused empty "path: $work/empty.jsonl" "holds no rows"
echo "rl dataset: 2 steps on JSONL and on Parquet (chat messages, nested answer); bad datasets refused before training"
