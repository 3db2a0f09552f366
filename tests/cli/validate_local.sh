#!/usr/bin/env bash
# `tlt validate` checks what a job names on this machine (issue 55, runtime/cli/local_checks.h):
# each bad input of a new user's trial is refused with its field path (a missing dataset, an
# empty one, an answerField no row has, a held-out file that repeats training prompts, a
# response longer than the model's context leaves room for, a JSON array for JSON Lines, a reward
# program that crashes, answers a string or holds its answers in a buffer); reward programs the
# job's runner forgives (a banner on stdout, Python's unflushed print) get a warning and pass; a
# relative path is read from the working directory, and a missing one says which directory that
# was and where the file is instead. `tlt run` prints the same errors itself, before it loads
# anything, and names the real numbers of a context too small.
# Usage: validate_local.sh TLT_BINARY SOURCE_DIR
set -u
tlt=$1; src=$2
fx=$src/tests/models/fixtures
data=$src/tests/dataset
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
export PYTHONDONTWRITEBYTECODE=1
unset PYTHONUNBUFFERED  # the trial's own environment: the runner adds it, validate must see why
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# manifest NAME DATASET REWARD [MAX_RESPONSE_TOKENS] > FILE
manifest() {
  cat <<YAML
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata: {name: $1}
spec:
  model: {path: $fx/tiny-llama-hf}
  task:
    dataset: {$2}
  reward: {$3}
  algorithm: {steps: 2, promptsPerStep: 4, groupSize: 2, maxResponseTokens: ${4:-16}}
  metrics: {port: 0}
YAML
}
arith="path: $data/arith.jsonl, heldOut: 2"

# refused NAME PATTERN...: `tlt validate NAME.yaml` fails and its errors hold every PATTERN.
refused() {
  local name=$1 out
  shift
  if out=$("$tlt" validate "$name.yaml" 2>&1); then bad "$name: accepted:"; echo "$out"; return; fi
  for p in "$@"; do
    grep -qF -- "$p" <<<"$out" || { bad "$name: the errors do not say: $p"; echo "$out"; }
  done
}
# passes NAME PATTERN...: `tlt validate NAME.yaml` passes and says every PATTERN.
passes() {
  local name=$1 out
  shift
  out=$("$tlt" validate "$name.yaml" 2>&1) || { bad "$name: refused:"; echo "$out"; return; }
  for p in "$@"; do
    grep -qF -- "$p" <<<"$out" || { bad "$name: validate does not say: $p"; echo "$out"; }
  done
}

# The dataset.
manifest missing "path: data/train.jsonl" "type: math" > missing.yaml
refused missing "spec.task.dataset.path: data/train.jsonl: no such file or directory (a relative path is read from the working directory, $work)"
: > empty.jsonl
manifest empty "path: empty.jsonl" "type: math" > empty.yaml
refused empty "spec.task.dataset.path: empty.jsonl holds no rows"
manifest field "path: $data/arith.jsonl, answerField: solution" "type: math" > field.yaml
refused field "spec.task.dataset.answerField: $data/arith.jsonl:1: the row has no field \"solution\" (its fields: answer, extra, prompt)"
sed -n '3,5p' "$data/arith.jsonl" > held.jsonl
manifest overlap "path: $data/arith.jsonl, heldOutPath: held.jsonl" "type: math" > overlap.yaml
refused overlap "spec.task.dataset.heldOutPath: 3 held-out rows have a prompt that training rows also have (first: held.jsonl:1 = $data/arith.jsonl:3)"
{ cat "$data/arith.jsonl"; sed -n '2p' "$data/arith.jsonl"; } > repeats.jsonl
manifest repeats "path: repeats.jsonl, heldOut: 2" "type: math" > repeats.yaml
passes repeats "warning: spec.task.dataset.heldOut: 1 training rows repeat an earlier row's prompt (first: repeats.jsonl:2 and repeats.jsonl:13)"
printf '[\n  {"prompt": "1 + 1?", "answer": "2"}\n]\n' > rows.json
manifest array "path: rows.json" "type: math" > array.yaml
refused array "spec.task.dataset.path: rows.json:1: not valid JSON; this looks like a JSON array: tlt reads JSON Lines, one object per line; convert it with \`jq -c '.[]' rows.json > rows.jsonl\`"
manifest numeric "path: $data/arith.jsonl, heldOut: 2, answerField: extra" "type: numeric" > numeric.yaml
refused numeric "spec.task.dataset.answerField: $data/arith.jsonl:1: \"extra\": "

# Relative paths: from the working directory; a file beside the manifest is pointed at.
mkdir -p jobs/data && cp "$data/arith.jsonl" jobs/data/train.jsonl
manifest beside "path: data/train.jsonl, heldOut: 2" "type: math" > jobs/beside.yaml
refused jobs/beside "data/train.jsonl: no such file or directory (a relative path is read from the working directory, $work); jobs/data/train.jsonl exists beside the manifest: give that path, or run tlt from jobs"
(cd jobs && "$tlt" validate beside.yaml >/dev/null 2>&1) || bad "beside.yaml: refused from its own directory"

# The model: its context (the tiny llama's is 128 positions) and its tokenizer.
manifest context "$arith" "type: math" 100 > context.yaml
refused context "spec.algorithm.maxResponseTokens: 100 tokens of response and 64 of drafting headroom leave no room for a prompt in the 128-token context of spec.model.path $fx/tiny-llama-hf; set it below 64"
manifest fits "$arith" "type: math" 63 > fits.yaml
passes fits ": ok (RLJob fits)"
sed "s|$fx/tiny-llama-hf|$fx/tiny-llama.gguf|" fits.yaml > notokenizer.yaml
refused notokenizer "spec.model.path: $fx/tiny-llama.gguf carries no tokenizer an RLJob can use"

# The reward program, started once on a made-up request (the dataset's first row).
cat > good.py <<'PY'
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    print(json.dumps({"id": r["id"], "reward": float(r["response"] == r["answer"])}), flush=True)
PY
cat > chatty.py <<'PY'
import json, sys
print("Loading the reward model... done", flush=True)
for line in sys.stdin:
    r = json.loads(line)
    print("debug:", r["id"], flush=True)
    print(json.dumps({"id": r["id"], "reward": True}), flush=True)
PY
cat > unflushed.py <<'PY'
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    print(json.dumps({"id": r["id"], "reward": {"score": 0.5}}))
PY
cat > unflushed.pl <<'PL'
while (my $line = <STDIN>) { $line =~ /"id":\s*"([^"]*)"/; print "{\"id\": \"$1\", \"reward\": 1}\n"; }
PL
cat > slow.py <<'PY'
import json, sys, time
for line in sys.stdin:
    r = json.loads(line)
    time.sleep(1.5)  # a judge's network call: idle, but not waiting for input
    print(json.dumps({"id": r["id"], "reward": 1}), flush=True)
PY
cat > crash.py <<'PY'
import json, sys
for line in sys.stdin:
    raise KeyError("ground_truth")
PY
cat > string.py <<'PY'
import json, sys
for line in sys.stdin:
    print(json.dumps({"id": json.loads(line)["id"], "reward": "yes"}), flush=True)
PY
for p in good chatty unflushed slow crash string; do
  manifest "r-$p" "$arith" "type: command, command: [python3, $p.py]" > "r-$p.yaml"
done
manifest r-perl "$arith" "type: command, command: [perl, unflushed.pl]" > r-perl.yaml
manifest r-none "$arith" "type: command, command: [no-such-reward-program]" > r-none.yaml
passes r-good "note: spec.reward.command: answered a made-up request ($data/arith.jsonl:1, answered with its own answer) in " "with reward 1"
passes r-chatty "warning: spec.reward.command: printed 2 lines on stdout that are not answers (first: \"Loading the reward model... done\")" "with reward 1"
passes r-unflushed "warning: spec.reward.command: answered only when its input closed: it holds its output in a buffer. It runs because tlt starts it with PYTHONUNBUFFERED=1" "with reward 0.5"
passes r-slow "note: spec.reward.command: answered a made-up request" "with reward 1"
refused r-perl "spec.reward.command: answered only when its input closed: it holds its output in a buffer, so a job would wait spec.reward.timeout (30 s)"
refused r-crash "spec.reward.command: ended before it answered the made-up request (exit status 1); its stderr ends:" "KeyError: 'ground_truth'"
refused r-string "spec.reward.command: the reward for id \"tlt-validate-1\" must be a number, true, false or {\"score\": number} (got \"yes\")"
refused r-none "spec.reward.command: cannot start no-such-reward-program"

# A manifest naming nothing on this machine is checked offline, at once.
start=$(date +%s%N)
out=$("$tlt" validate "$src/examples/rljob-cluster.yaml" 2>&1) || bad "rljob-cluster.yaml refused: $out"
grep -qF "note: spec.model.path: /models/policy-7b.gguf is not on this machine" <<<"$out" ||
  bad "rljob-cluster.yaml: no note about the pod's path: $out"
ms=$(( ($(date +%s%N) - start) / 1000000 ))
[ "$ms" -lt 5000 ] || bad "validate took $ms ms on a manifest without local files"

# `tlt run` prints the errors itself (one prefix), before it loads a model or writes a file.
out=$("$tlt" run field.yaml 2>&1) && bad "tlt run accepted field.yaml"
grep -qF "tlt run: field.yaml: 1 error" <<<"$out" && grep -qF "  spec.task.dataset.answerField: " <<<"$out" ||
  bad "tlt run does not list the errors: $out"
grep -q "tlt validate" <<<"$out" && bad "tlt run points at tlt validate: $out"
printf 'apiVersion: tlt.dev/v1alpha1\nkind: RLJob\nmetadata: {name: x}\nspec: {algorithm: {steps: 0}}\n' > invalid.yaml
out=$("$tlt" run invalid.yaml 2>&1) && bad "tlt run accepted invalid.yaml"
grep -qF "tlt run: invalid.yaml: 1 error" <<<"$out" && grep -qF "  spec.algorithm.steps: must be >= 1 (got 0)" <<<"$out" ||
  bad "tlt run does not print the manifest's errors: $out"
out=$("$tlt" run context.yaml 2>&1) && bad "tlt run accepted context.yaml"
grep -qF "spec.algorithm.maxResponseTokens: 100 tokens of response and 64 of drafting headroom leave no room for a prompt in the 128-token context" <<<"$out" ||
  bad "tlt run does not give the context's numbers: $out"
grep -q "tlt run: tlt:" <<<"$out" && bad "a doubled prefix: $out"
[ -e .tlt ] && bad "tlt run wrote .tlt for a job it refused"
# A run that fails on its reward says so once: "tlt run: spec.reward.command: ...".
cat > dies.yaml <<YAML
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata: {name: dies}
spec:
  model: {preset: micro}
  task: {name: arithmetic-cot, heldOut: 2}
  reward: {type: command, command: [python3, -c, "import sys; sys.exit(3)"], retries: 0}
  algorithm: {steps: 1, promptsPerStep: 2, groupSize: 2, maxResponseTokens: 8, warmStartSteps: 0}
  drafter: {warmStartSteps: 0}
  checkpoint: {path: $work/dies}
  metrics: {port: 0}
YAML
out=$("$tlt" run dies.yaml 2>&1) && bad "a run whose reward program dies succeeded"
grep -q "^tlt run: .*spec.reward.command" <<<"$out" || bad "the reward's failure is not said: $out"
grep -q "tlt run: tlt:" <<<"$out" && bad "a doubled prefix: $(grep 'tlt run: tlt:' <<<"$out")"

[ $fail -eq 0 ] && echo "validate: every bad input refused at its field; forgiven reward programs warned; tlt run prints the errors"
exit $fail
