#!/usr/bin/env bash
# An RLJob whose reward is the user's program (spec.reward.type: command), through `tlt run`:
#   1. bench/reward_overlap.sh on 2 steps: rewards scored while the tail generates are the very
#      rewards of serial scoring (it fails otherwise), and it prints the step times' ratio;
#   2. a reward program that dies for good after a step: the next step fails with an error
#      naming spec.reward.command and spec.reward.retries, tlt exits non-zero, the last
#      checkpoint (step 1) is kept, and the report says the run failed, with step 1 (report.json,
#      baseline.json) and step 1's samples (samples-baseline.jsonl);
#   3. a reward program that does not exist: refused before any training, naming the field;
#   4. reward programs as users write them (issue 55), on a verl-layout dataset: a program that
#      does not flush, prints a banner and debug lines on stdout, answers true, false and
#      {"score": x} and reads the row's data_source (spec.reward.fields) runs, its stray lines go
#      to the log, and the report's step rewards are the means of what it answered; every response
#      is in samples.jsonl (spec.report.samples: 1) with the reward the program answered for its
#      id, and `tlt samples` prints them (--step, --phase, --worst); then verl's compute_score
#      served by examples/rewards/verl_reward.py.
# Usage: reward_command.sh TLT_BINARY SOURCE_DIR
set -u
tlt=$1; src=$2
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

out=$("$src/bench/reward_overlap.sh" "$tlt" 2 20 2>&1) || { echo "$out"; fail "the bench failed"; }
echo "$out"
echo "$out" | grep -q "ratio serial / overlapped: " || fail "the bench printed no ratio"

# manifest NAME COMMAND_YAML > FILE
manifest() {
  cat <<YAML
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata: {name: $1}
spec:
  model: {preset: micro}
  task: {name: arithmetic-cot, seed: 1, heldOut: 4}
  reward: {type: command, command: $2, timeout: 5s, retries: 1}
  algorithm: {steps: 3, promptsPerStep: 4, groupSize: 4, maxResponseTokens: 64, seed: 0}
  roles: {rollout: {replicas: 2}}
  checkpoint: {path: $work/$1, everySteps: 1}
  metrics: {port: 0}
YAML
}
# Answers 32 requests in all (the held-out evaluation's 16 and step 1's 16), then exits at once,
# however often it is restarted.
cat > "$work/dies.py" <<PY
import json, os, sys
count = "$work/answered"
n = int(open(count).read()) if os.path.exists(count) else 0
for line in sys.stdin:
    if n >= 32:
        sys.exit(7)
    print(json.dumps({"id": json.loads(line)["id"], "reward": 0.5}), flush=True)
    n += 1
    open(count, "w").write(str(n))
PY
manifest dies "[python3, $work/dies.py]" > "$work/dies.yaml"
"$tlt" run "$work/dies.yaml" --baseline > "$work/dies.log" 2>&1 && { cat "$work/dies.log"; fail "a dead reward program did not fail the job"; }
grep -q "spec.reward.command" "$work/dies.log" || { cat "$work/dies.log"; fail "the error does not name spec.reward.command"; }
grep -q "exited with status 7" "$work/dies.log" || { cat "$work/dies.log"; fail "the error does not say how the program ended"; }
grep -q "spec.reward.retries" "$work/dies.log" || { cat "$work/dies.log"; fail "the error does not name spec.reward.retries"; }
[ -d "$work/dies/baseline/step-1" ] || { ls -R "$work/dies" | head; fail "the last checkpoint (step 1) is gone"; }
[ -d "$work/dies/baseline/step-2" ] && fail "a failed step wrote a checkpoint"
python3 - "$work/dies/report" <<'PY' || { cat "$work/dies.log"; fail "the failed run's report (above)"; }
import json, sys
d = sys.argv[1]
summary = json.load(open(d + "/report.json"))
assert "spec.reward.command" in summary.get("failed", ""), summary
run = summary["baseline"]
assert run["stepsCompleted"] == 1 and "exited with status 7" in run["failed"], run
steps = json.load(open(d + "/baseline.json"))["steps"]
assert [s["step"] for s in steps] == [1] and steps[0]["rewardMean"] == 0.5, steps
assert run["stepRewards"] == [0.5], run
rows = [json.loads(l) for l in open(d + "/samples-baseline.jsonl")]
# One in 64 (the default) of the held-out evaluation's 16 and step 1's 16: the first of each.
assert [(r["phase"], r["step"], r["id"]) for r in rows] == [("heldout", 0, "heldout-0-0"), ("train", 1, "s1-0")], rows
assert all(r["reward"] == 0.5 for r in rows), rows
print("  the failed run's report: step 1 (reward 0.5), its error, its samples")
PY

manifest missing "[/nonexistent/reward.py]" > "$work/missing.yaml"
"$tlt" run "$work/missing.yaml" --baseline > "$work/missing.log" 2>&1 && fail "a missing reward program did not fail"
grep -q "spec.reward.command.*cannot start /nonexistent/reward.py" "$work/missing.log" || { cat "$work/missing.log"; fail "the error does not name the missing program"; }
grep -q "^baseline: step 1" "$work/missing.log" && fail "a step ran without a reward program"
# ---- 4. programs as users write them, on a dataset -----------------------------------------------
# dataset_manifest NAME COMMAND_YAML > FILE: the tiny llama fixture on tests/dataset/verl.parquet.
dataset_manifest() {
  cat <<YAML
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata: {name: $1}
spec:
  model: {path: $src/tests/models/fixtures/tiny-llama-hf}
  task:
    seed: 3
    dataset: {path: $src/tests/dataset/verl.parquet, answerField: reward_model.ground_truth, heldOut: 2}
  reward: {type: command, command: $2, fields: [data_source, extra_info], timeout: 20s}
  algorithm: {steps: 2, promptsPerStep: 4, groupSize: 2, maxResponseTokens: 16, seed: 0}
  roles: {rollout: {replicas: 1}}
  drafter: {warmStartSteps: 0}
  checkpoint: {path: $work/$1, everySteps: 1}
  metrics: {port: 0}
  report: {samples: 1}
YAML
}
export TLT_CACHE=$work/cache
# Never flushes (PYTHONUNBUFFERED=1 from tlt makes that work), chats on stdout, answers by the
# id's last digit true, false or verl's dict, and logs each answer to a file.
cat > "$work/user.py" <<PY
import json, sys
print("user reward: loading a tokenizer... done")
log = open("$work/answers.jsonl", "a")
for line in sys.stdin:
    r = json.loads(line)
    assert r["data_source"] == "tlt/arith" and "extra_info" in r, r
    print("scoring", r["id"])
    k = int(r["id"][-1]) % 3
    reward = [True, False, {"score": 0.25, "acc": True}][k]
    log.write(json.dumps({"id": r["id"], "reward": [1.0, 0.0, 0.25][k]}) + "\n"); log.flush()
    print(json.dumps({"id": r["id"], "reward": reward}))
PY
dataset_manifest users "[python3, $work/user.py]" > "$work/users.yaml"
"$tlt" run "$work/users.yaml" > "$work/users.log" 2>&1 || { cat "$work/users.log"; fail "an unflushed, chatty program failed the job"; }
grep -q "reward: program output: user reward: loading a tokenizer... done" "$work/users.log" || { cat "$work/users.log"; fail "the banner is not in the log"; }
grep -q "reward: program output: scoring s1-0" "$work/users.log" || { cat "$work/users.log"; fail "the debug lines are not in the log"; }
python3 - "$work" <<'PY' || exit 1
import json, sys
w = sys.argv[1]
answers = [json.loads(l) for l in open(w + "/answers.jsonl")]
steps = json.load(open(w + "/users/report/tlt.json"))["steps"]
for s in steps:
    mine = [a["reward"] for a in answers if a["id"].startswith("s%d-" % s["step"])]
    if len(mine) != 8 or abs(sum(mine) / len(mine) - s["rewardMean"]) > 1e-9:
        print("FAIL: step %d: the report says %s, the program answered %s" % (s["step"], s["rewardMean"], mine)); sys.exit(1)
print("  step rewards equal the program's answers: %s" % [s["rewardMean"] for s in steps])
# samples.jsonl: every response (train: 2 steps x 8; held-out: 2 problems x 4, before and after),
# each with the reward the program logged for its id and the row the reward read.
rows = [json.loads(l) for l in open(w + "/users/report/samples.jsonl")]
logged = {}
for a in answers:
    logged.setdefault(a["id"], set()).add(a["reward"])
train = [r for r in rows if r["phase"] == "train"]
held = [r for r in rows if r["phase"] == "heldout"]
assert len(train) == 16 and len(held) == 16, (len(train), len(held))
assert sorted({r["step"] for r in held}) == [0, 2], {r["step"] for r in held}
for r in rows:
    assert logged.get(r["id"]) == {r["reward"]}, (r, logged.get(r["id"]))
    assert r["fields"]["data_source"] == "tlt/arith", r
    assert r["prompt"] and r["finish"] in ("eos", "length", "context"), r
    assert 1 <= r["tokens"] <= 16 and (r["finish"] != "length" or r["tokens"] == 16), r
for s in steps:
    mine = [r["reward"] for r in train if r["step"] == s["step"]]
    assert abs(sum(mine) / len(mine) - s["rewardMean"]) < 1e-9, (s["step"], mine, s["rewardMean"])
print("  samples.jsonl: %d rows, each with the reward the program answered" % len(rows))
PY
out=$("$tlt" samples "$work/users/report" --phase train --worst 3) || { echo "$out"; fail "tlt samples failed"; }
[ "$(grep -c '^step [12]  train  s[12]-[0-9]  (.*)  reward 0  [0-9]* tokens, ' <<<"$out")" = 3 ] || { echo "$out"; fail "tlt samples --worst 3 did not show three rows of reward 0"; }
grep -q '^  response  | ' <<<"$out" || { echo "$out"; fail "tlt samples shows no response"; }
grep -q "samples: 3 shown (the lowest rewards of 16) of 32 rows in $work/users/report/samples.jsonl; mean reward 0$" <<<"$out" || { echo "$out"; fail "tlt samples' summary"; }
out=$("$tlt" samples "$work/users/report" --step 2) || { echo "$out"; fail "tlt samples --step failed"; }
grep -q "samples: 16 shown of 32 rows" <<<"$out" || { echo "$out"; fail "tlt samples --step 2 is not step 2's train and held-out rows"; }
"$tlt" samples "$work/dies/report" > "$work/samples.err" 2>&1 && fail "tlt samples took a directory without samples.jsonl"
grep -q "give one of $work/dies/report/samples-baseline.jsonl" "$work/samples.err" || { cat "$work/samples.err"; fail "tlt samples does not name the baseline's file"; }
cat > "$work/verl_score.py" <<'PY'
def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    print("verl-style print on stdout:", data_source)
    return {"score": 1.0 if solution_str.strip() == ground_truth else 0.0, "source": data_source}
PY
dataset_manifest verl "[python3, $src/examples/rewards/verl_reward.py, $work/verl_score.py]" > "$work/verl.yaml"
"$tlt" run "$work/verl.yaml" > "$work/verl.log" 2>&1 || { cat "$work/verl.log"; fail "verl's compute_score through verl_reward.py failed the job"; }
grep -q "verl-style print on stdout: tlt/arith" "$work/verl.log" || { cat "$work/verl.log"; fail "the function's print is not in the log"; }
grep -q "reward: program output" "$work/verl.log" && { cat "$work/verl.log"; fail "verl_reward.py let a print reach stdout"; }
echo "reward_command: PASS"
