#!/usr/bin/env bash
# A TSTPretrainJob with spec.model.path (issue 19), end to end through `tlt run` and `tlt export`:
#   - from the tiny Hugging Face llama (its own tokenizer.json tokenizes the corpus), from the tiny
#     GGUF (spec.data.tokenizer.path: a tokenizer.json), and from a config.json alone (that
#     architecture from scratch): held-out loss falls in each;
#   - the bad inputs fail with errors that name the field: a tokenizer larger than the model's
#     embedding, a Hugging Face directory without tokenizer.json, a format that disagrees with
#     the path, a GGUF that carries no tokenizer;
#   - `tlt export` of the TST checkpoint writes a Hugging Face directory that transformers loads
#     (~/.cache/tlt/venv-hf; skipped with a message when absent) and our loader reads back;
#   - `tlt export` of what a short RLJob (examples/rljob-tiny.yaml, 2 steps) wrote: transformers
#     loads the policy (no tokenizer.json: the RL codec is tlt's own, and the export says so).
# Usage: model_jobs.sh TLT_BINARY SOURCE_DIR
set -u
tlt=$1; src=$2
fx=$src/tests/models/fixtures
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
export TLT_CACHE=$work/cache  # tokenized corpora of this test only
fail() { echo "FAIL: $*"; exit 1; }

# A corpus the 64-symbol tiny tokenizer can spell: upper-case text with digits and punctuation.
mkdir -p "$work/docs"
python3 - "$work/docs" <<'PY'
import random, sys
rng = random.Random(7)
words = ["THE", "STATE", "OF", "UNION", "IS", "STRONG", "WE", "HOLD", "THESE", "TRUTHS", "1776", "2024"]
for i in range(40):
    text = " ".join(rng.choice(words) + rng.choice([",", ".", "", "", ";"]) for _ in range(400))
    open("%s/doc-%02d.txt" % (sys.argv[1], i), "w").write(text)
PY
paths=$(ls "$work"/docs/*.txt | sed 's/.*/"&"/' | paste -sd, -)

# manifest NAME MODEL_LINES TOKENIZER_PATH > FILE
manifest() {
  cat <<EOF
apiVersion: tlt.dev/v1alpha1
kind: TSTPretrainJob
metadata: {name: $1}
spec:
  model: {$2}
  data:
    corpus: files
    paths: [$paths]
    tokenizer: {path: "$3"}
    heldOutFraction: 0.2
  training:
    steps: 30
    seqLen: 32
    batchSize: 8
    learningRate: 1.0e-2
    schedule: {warmupSteps: 3, decayFraction: 0.25}
    evalEverySteps: 10
    evalBatches: 2
  superposition: {bagSize: 2, ratio: 0.3}
  checkpoint: {path: "$work/ckpt-$1", everySteps: 10}
EOF
}

# run_ok NAME MODEL_LINES TOKENIZER_PATH: the run finishes and held-out loss falls by > 0.5.
run_ok() {
  manifest "$1" "$2" "$3" > "$work/$1.yaml"
  "$tlt" run "$work/$1.yaml" > "$work/$1.log" 2>&1 || { cat "$work/$1.log"; fail "$1: tlt run exited $?"; }
  python3 - "$work/ckpt-$1/report/report.json" "$1" <<'PY' || exit 1
import json, sys
run = json.load(open(sys.argv[1]))["tst"]
first, last = run[0]["heldOutLoss"], run[-1]["heldOutLoss"]
print("%s: held-out loss %.3f -> %.3f after %d steps" % (sys.argv[2], first, last, run[-1]["step"]))
if not last < first - 0.5:
    print("FAIL: %s: held-out loss did not fall: %s" % (sys.argv[2], [p["heldOutLoss"] for p in run])); sys.exit(1)
PY
}

# run_fails NAME MODEL_LINES TOKENIZER_PATH EXPECTED_TEXT
run_fails() {
  manifest "$1" "$2" "$3" > "$work/$1.yaml"
  if "$tlt" run "$work/$1.yaml" > "$work/$1.log" 2>&1; then fail "$1: accepted"; fi
  grep -qF -- "$4" "$work/$1.log" || { cat "$work/$1.log"; fail "$1: no error saying '$4'"; }
  echo "$1: refused: $(grep -F -- "$4" "$work/$1.log" | head -1)"
}

run_ok hf "path: $fx/tiny-llama-hf" ""
run_ok gguf "path: $fx/tiny-llama.gguf, format: gguf" "$fx/tiny-llama-hf/tokenizer.json"
mkdir -p "$work/scratch"
cp "$fx/tiny-llama-hf/config.json" "$fx/tiny-llama-hf/tokenizer.json" "$work/scratch/"
run_ok scratch "path: $work/scratch/config.json" ""
grep -q "tlt_tokenizer" "$work/ckpt-hf/tst/model.json" || fail "no model card beside the checkpoint"

# A tokenizer of 80 ids for a model of 64 embedding rows.
python3 - "$fx/tiny-llama-hf/tokenizer.json" "$work/big-tokenizer.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
for i in range(16): t["model"]["vocab"]["\u00c0\u00c1"[i % 2] * (i + 2)] = 64 + i
json.dump(t, open(sys.argv[2], "w"))
PY
run_fails big "path: $fx/tiny-llama-hf" "$work/big-tokenizer.json" "embedding has 64 rows"
mkdir -p "$work/notok"
cp "$fx/tiny-llama-hf/config.json" "$fx/tiny-llama-hf/model.safetensors" "$work/notok/"
run_fails notok "path: $work/notok" "" "tokenizer.json is missing"
run_fails wrongformat "path: $fx/tiny-llama-hf, format: gguf" "" "the format is gguf"
run_fails gguf-no-tokenizer "path: $fx/tiny-llama.gguf" "" "carries no tokenizer"

# Export the TST checkpoint; transformers and our own loader read it back.
"$tlt" export "$work/ckpt-hf" --hf "$work/exported" > "$work/export.log" 2>&1 || { cat "$work/export.log"; fail "tlt export exited $?"; }
for f in config.json model.safetensors tokenizer.json; do
  [ -f "$work/exported/$f" ] || { cat "$work/export.log"; fail "export wrote no $f"; }
done
"$tlt" generate --model "$work/exported" --prompt "THE STATE" --max-tokens 8 --temperature 0 > "$work/gen.log" 2>&1 || { cat "$work/gen.log"; fail "our loader cannot read the export"; }
py=${TLT_VENV_HF:-$HOME/.cache/tlt/venv-hf}/bin/python
if [ ! -x "$py" ]; then
  echo "SKIPPED transformers check: no $py (scripts/setup.sh makes it)"
  exit 0
fi
# A 2-step RLJob with checkpoints; its checkpoint.path exported.
python3 - "$src/examples/rljob-tiny.yaml" "$work/rl.yaml" "$work/ckpt-rl" <<'PY' || fail "cannot shorten the RL example"
import sys
s = open(sys.argv[1]).read()
for a, b in {"steps: 20": "steps: 2", "promptsPerStep: 16": "promptsPerStep: 4",
             "groupSize: 16 ": "groupSize: 4 ", "maxResponseTokens: 96": "maxResponseTokens: 16",
             "warmStartSteps: 1100": "warmStartSteps: 5", "heldOut: 512": "heldOut: 8",
             "path: .tlt/rljob-tiny": "path: " + sys.argv[3], "everySteps: 2": "everySteps: 1",
             "port: 9400": "port: 0"}.items():
    assert a in s, a
    s = s.replace(a, b)
open(sys.argv[2], "w").write(s)
PY
"$tlt" run "$work/rl.yaml" > "$work/rl.log" 2>&1 || { tail -20 "$work/rl.log"; fail "the RLJob exited $?"; }
"$tlt" export "$work/ckpt-rl" --hf "$work/exported-rl" > "$work/export-rl.log" 2>&1 || { cat "$work/export-rl.log"; fail "tlt export of the RL checkpoint exited $?"; }
grep -q "note: no tokenizer.json" "$work/export-rl.log" || { cat "$work/export-rl.log"; fail "the RL export does not say why it has no tokenizer"; }

"$py" - "$work/exported" <<'PY' || exit 1
import sys, torch, transformers
d = sys.argv[1]
m = transformers.AutoModelForCausalLM.from_pretrained(d, torch_dtype=torch.float32)
tok = transformers.AutoTokenizer.from_pretrained(d)
ids = tok("THE STATE OF THE UNION", return_tensors="pt").input_ids
logits = m(ids).logits
if not torch.isfinite(logits).all(): print("FAIL: transformers' logits are not finite"); sys.exit(1)
print("export: transformers %s loads %s (%s, %d parameters), %d prompt tokens" % (
    transformers.__version__, d.split("/")[-1], type(m).__name__, sum(p.numel() for p in m.parameters()), ids.shape[1]))
PY
"$py" - "$work/exported-rl" <<'PY' || exit 1
import sys, torch, transformers
m = transformers.AutoModelForCausalLM.from_pretrained(sys.argv[1], torch_dtype=torch.float32)
logits = m(torch.tensor([[1, 2, 3, 4]])).logits
if not torch.isfinite(logits).all(): print("FAIL: transformers' logits are not finite"); sys.exit(1)
print("export: transformers loads the RL policy (%s, vocab %d, %d parameters)" % (
    type(m).__name__, logits.shape[-1], sum(p.numel() for p in m.parameters())))
PY
