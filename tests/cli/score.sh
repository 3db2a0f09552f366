#!/usr/bin/env bash
# `tlt score JOB ROWS` gives the job's rewards (issue 55): a 2-step RLJob of the tiny Hugging Face
# llama on tests/dataset/arith.jsonl scores with a command reward that logs every request it gets
# and what it answered (examples/rewards/exact_reward.py's rule); `tlt score` of the logged
# responses, with the same job, gives the logged rewards, and so does the same job with the
# built-in `exact` verifier (the program's twin, ScorerTest.PythonExactRewardMatchesTheBuiltInVerifier)
# and with an http endpoint serving the same rule. Rows a person writes (marked answers, a list of
# references, a verl row with its own field names) score as the verifier says. Bad rows are
# refused naming the row.
# Usage: score.sh TLT_BINARY SOURCE_DIR
set -u
tlt=$1; src=$2
fx=$src/tests/models/fixtures
work=$(mktemp -d); trap 'kill $server 2>/dev/null; rm -rf "$work"' EXIT
server=
export TLT_CACHE=$work/cache PYTHONDONTWRITEBYTECODE=1
fail() { echo "FAIL: $*"; exit 1; }

cat > "$work/logged_reward.py" <<PY
import json, sys
sys.path.insert(0, "$src/examples/rewards")
from exact_reward import score
with open(sys.argv[1], "a") as log:
    for line in sys.stdin:
        r = json.loads(line)
        reward = score(r["response"], r["answer"])
        log.write(json.dumps({"id": r["id"], "prompt": r["prompt"], "response": r["response"],
                              "answer": r["answer"], "reward": reward}) + "\n")
        log.flush()
        print(json.dumps({"id": r["id"], "reward": reward}), flush=True)
PY

# manifest NAME REWARD > FILE
manifest() {
  cat <<YAML
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata: {name: $1}
spec:
  model: {path: $fx/tiny-llama-hf}
  task:
    seed: 3
    dataset: {path: $src/tests/dataset/arith.jsonl, heldOut: 4}
  reward: {$2}
  algorithm: {steps: 2, promptsPerStep: 4, groupSize: 2, maxResponseTokens: 16,
              learningRate: 1.0e-3, seed: 0}
  roles: {rollout: {replicas: 1}}
  drafter: {warmStartSteps: 0}
  checkpoint: {path: $work/$1}
  metrics: {port: 0}
YAML
}
manifest command "type: command, command: [python3, $work/logged_reward.py, $work/log.jsonl]" > "$work/command.yaml"
"$tlt" run "$work/command.yaml" > "$work/run.log" 2>&1 || { cat "$work/run.log"; fail "tlt run exited $?"; }
n=$(wc -l < "$work/log.jsonl")
[ "$n" -ge 16 ] || fail "the reward program logged $n requests"

# Rows a person writes, beside the run's: marked answers, a list of references, a wrong answer.
cat > "$work/mine.jsonl" <<'ROWS'
{"prompt": "What is 3 + 7?", "response": "3 + 7 = 10. Answer: 10", "answer": "10"}
{"prompt": "What is 3 + 7?", "response": "\\boxed{10}", "answer": ["ten", "10"]}
{"prompt": "What is 3 + 7?", "response": "Answer: 11", "answer": "10"}
ROWS
cat "$work/log.jsonl" "$work/mine.jsonl" > "$work/rows.jsonl"

# scores JOB > FILE: `tlt score --json` as one reward per line.
scores() {
  "$tlt" score "$work/$1.yaml" "$work/rows.jsonl" --json 2>"$work/$1.err" |
    python3 -c 'import json, sys; [print(repr(json.loads(l)["reward"])) for l in sys.stdin]'
}
python3 -c 'import json, sys; [print(repr(float(json.loads(l)["reward"]))) for l in open(sys.argv[1])]' \
  "$work/log.jsonl" > "$work/want"
printf '1.0\n1.0\n0.0\n' >> "$work/want"
scores command > "$work/got.command" || { cat "$work/command.err"; fail "tlt score (command) exited $?"; }
manifest exact "type: exact" > "$work/exact.yaml"
scores exact > "$work/got.exact" || { cat "$work/exact.err"; fail "tlt score (exact) exited $?"; }
# The same rule behind http.
cat > "$work/exact_server.py" <<PY
import json, os, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
sys.path.insert(0, "$src/examples/rewards")
from exact_reward import score
class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass
    def do_POST(self):
        r = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        body = json.dumps({"id": r["id"], "reward": score(r["response"], r["answer"])}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
open(sys.argv[1] + ".tmp", "w").write(str(server.server_address[1]))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
server.serve_forever()
PY
python3 "$work/exact_server.py" "$work/port" > "$work/server.log" 2>&1 &
server=$!
for _ in $(seq 1 100); do [ -s "$work/port" ] && break; sleep 0.1; done
port=$(cat "$work/port")
manifest http "type: http, url: \"http://127.0.0.1:$port/score\"" > "$work/http.yaml"
scores http > "$work/got.http" || { cat "$work/http.err" "$work/server.log"; fail "tlt score (http) exited $?"; }
for kind in command exact http; do
  diff "$work/want" "$work/got.$kind" > "$work/diff" ||
    { cat "$work/diff"; fail "tlt score ($kind) differs from the job's rewards (< the job's log)"; }
done
ones=$(grep -c '^1.0$' "$work/want")
echo "score: $n logged responses and 3 written rows: command, exact and http give the job's rewards ($ones of $((n + 3)) are 1)"

# The job's own field names (verl's layout: chat messages, a nested answer) and the text output.
printf '{"prompt": [{"role": "user", "content": "What is 2 + 2?"}], "reward_model": {"ground_truth": "4"}, "response": "#### 4"}\n' > "$work/verl.jsonl"
sed 's|dataset: {path: [^,]*, heldOut: 4}|dataset: {path: '"$src"'/tests/dataset/verl.parquet, answerField: reward_model.ground_truth, heldOut: 2}|' \
  "$work/exact.yaml" > "$work/verl.yaml"
out=$("$tlt" score "$work/verl.yaml" "$work/verl.jsonl" 2>&1) || { echo "$out"; fail "tlt score (verl row) exited"; }
grep -qF "$work/verl.jsonl:1  1  #### 4" <<<"$out" && grep -qF "score: 1 rows, reward exact: mean 1" <<<"$out" ||
  fail "the verl row: $out"

# Bad rows, named.
printf '{"prompt": "x", "answer": "1"}\n' > "$work/noresp.jsonl"
out=$("$tlt" score "$work/exact.yaml" "$work/noresp.jsonl" 2>&1) && fail "a row without a response was scored"
grep -qF "tlt score: $work/noresp.jsonl:1: the row has no \"response\" string" <<<"$out" || fail "no response: $out"
printf '{"prompt": "x", "response": "1"}\n' > "$work/noanswer.jsonl"
out=$("$tlt" score "$work/exact.yaml" "$work/noanswer.jsonl" 2>&1) && fail "a row without an answer was scored"
grep -qF "tlt score: $work/noanswer.jsonl:1: the row has no \"answer\"" <<<"$out" || fail "no answer: $out"
echo "score: the job's field names read; rows without a response or an answer refused by place"
