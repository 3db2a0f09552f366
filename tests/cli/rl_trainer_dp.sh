#!/usr/bin/env bash
# An RLJob's policy trained by 2 trainer ranks (spec.roles.trainer.replicas: 2; issue 56), end to
# end through `tlt run` (rank 1 a `tlt run-role` process beside the rollout workers, a file store,
# Gloo over 127.0.0.1, AdamW state sharded):
#   1. the micro preset and the tiny Hugging Face llama: per-step rewards and token counts equal
#      the 1-rank run's exactly (rollouts are seeded per request), loss and KL within 1e-4
#      relative; the report says "trainerRanks": 2 and each rank's optimizer bytes (about half
#      of the 1-rank run's each);
#   2. a checkpoint written at 2 ranks resumes at 1, and one written at 1 resumes at 2: step 2
#      equals the uninterrupted run's;
#   3. the rank process killed mid-run: the step fails naming it, the ranks start again from the
#      last checkpoint and the run's steps equal an uninterrupted run's;
#   4. the pods' path: `tlt run-role` trainer 0 (hosting the group's store on
#      TLT_TRAINER_GROUP_PORT, TLT_TRAINER_WORLD=2), trainer 1 (reaching it at
#      TLT_TRAINER_GROUP_ADDRESS, host:port, under the job secret's prefix) and a rollout pod give
#      the same steps.
# The runs are --baseline (no drafter): the trainer ranks are what is tested, and speculation is
# lossless (cli.rl_run, cli.rl_model).
# Usage: rl_trainer_dp.sh TLT_BINARY SOURCE_DIR
set -u
tlt=$1; src=$2
fx=$src/tests/models/fixtures
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
export TLT_CACHE=$work/cache  # the warm start is trained once, shared by every run here
fail() { echo "FAIL: $*"; exit 1; }

# manifest NAME MODEL TRAINERS STEPS > FILE
manifest() {
  cat <<YAML
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata: {name: $1}
spec:
  model: {$2}
  task: {name: arithmetic-cot, seed: 1, heldOut: 4}
  algorithm: {steps: $4, promptsPerStep: 4, groupSize: 4, maxResponseTokens: 24,
              learningRate: 1.0e-3, klCoef: 0.01, warmStartSteps: 100, seed: 0}
  roles: {rollout: {replicas: 1}, trainer: {replicas: $3}}
  checkpoint: {path: $work/$1, everySteps: 1}
  metrics: {port: 0}
YAML
}
run() {  # run NAME [FLAGS...]
  local name=$1; shift
  "$tlt" --threads 1 run "$work/$name.yaml" --baseline "$@" > "$work/$name.log" 2>&1 ||
    { cat "$work/$name.log"; for l in "$work/$name"/baseline/trainers/*.log; do [ -f "$l" ] && cat "$l"; done; fail "$name exited $?"; }
}
compare() {  # compare ONE TWO [FIRST_STEP] [LABEL]: steps of TWO's run LABEL against ONE's
  python3 - "$work/$1/report" "$work/$2/report" "${3:-1}" "${4:-baseline}" <<'PY' || exit 1
import json, sys
def fail(m): print("FAIL:", m); sys.exit(1)
one = {s["step"]: s for s in json.load(open(sys.argv[1] + "/baseline.json"))["steps"]}
two_run = json.load(open(sys.argv[2] + "/" + sys.argv[4] + ".json"))
two = {s["step"]: s for s in two_run["steps"]}
first = int(sys.argv[3])
checked = 0
for step, b in sorted(two.items()):
    if step < first or step not in one: continue
    a = one[step]
    for k in ("rewardMean", "responseTokens", "tokens"):
        if a[k] != b[k]: fail("%s step %d %s: %s vs %s" % (sys.argv[2], step, k, a[k], b[k]))
    for k in ("loss", "kl"):
        if abs(a[k] - b[k]) > 1e-4 * max(abs(a[k]), 1e-6):
            fail("%s step %d %s: %.9g vs %.9g" % (sys.argv[2], step, k, a[k], b[k]))
    print("  step %d: reward %.4f tokens %d loss %.6g vs %.6g kl %.3g vs %.3g" % (
        step, b["rewardMean"], b["tokens"], a["loss"], b["loss"], a["kl"], b["kl"]))
    checked += 1
if checked == 0: fail("no step compared")
if first == 1 and not any(s["kl"] > 0 and s["loss"] != 0 for s in two.values()):
    fail("%s: no step with a nonzero loss and KL to compare" % sys.argv[2])
PY
}
ranks() {  # ranks NAME: the run's trainerRanks, then each rank's optimizer bytes
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["trainerRanks"], *r["trainerOptimizerBytes"])' \
    "$work/$1/report/baseline.json"
}

# 1. One rank against two, on the micro preset and the tiny llama.
for model in micro llama; do
  case $model in
    micro) spec="preset: micro" ;;
    llama) spec="path: $fx/tiny-llama-hf" ;;
  esac
  # 3 steps: step 1's rewards are all 0 on these untrained models, so its update moves nothing
  # and step 2's KL can be 0; step 3's is not.
  manifest "$model-1" "$spec" 1 3 > "$work/$model-1.yaml"
  manifest "$model-2" "$spec" 2 3 > "$work/$model-2.yaml"
  run "$model-1"; run "$model-2"
  grep -q "trainer: 2 ranks, data parallel over Gloo" "$work/$model-2.log" ||
    { cat "$work/$model-2.log"; fail "$model: no trainer group reported"; }
  grep -q "trainer rank 1 of 2 done" "$work/$model-2/baseline/trainers/trainer-1.log" ||
    fail "$model: rank 1 did not finish: $(cat "$work/$model-2/baseline/trainers/trainer-1.log")"
  echo "rl trainer dp: $model, 2 ranks against 1:"
  compare "$model-1" "$model-2"
  read -r n one_bytes <<< "$(ranks "$model-1")"
  read -r n2 b0 b1 <<< "$(ranks "$model-2")"
  [ "$n" = 1 ] && [ "$n2" = 2 ] || fail "$model: trainerRanks $n and $n2, expected 1 and 2"
  [ $((b0 + b1)) = "$one_bytes" ] || fail "$model: optimizer bytes $b0 + $b1 != 1 rank's $one_bytes"
  for b in $b0 $b1; do
    [ $((b * 10)) -lt $((one_bytes * 6)) ] || fail "$model: a rank holds $b of $one_bytes optimizer bytes"
  done
  echo "rl trainer dp: $model optimizer bytes: 1 rank $one_bytes, 2 ranks $b0 + $b1"
done

# 2. Checkpoints cross rank counts: step 1 at 2 ranks, step 2 resumed at 1; and the reverse.
spec="preset: micro"
manifest a "$spec" 2 1 > "$work/a.yaml"; run a
manifest a "$spec" 1 2 > "$work/a.yaml"; run a --resume
manifest b "$spec" 1 1 > "$work/b.yaml"; run b
manifest b "$spec" 2 2 > "$work/b.yaml"; run b --resume
grep -q "resumed from" "$work/a.log" && grep -q "resumed from" "$work/b.log" || fail "a run did not resume"
echo "rl trainer dp: trained at 2 ranks, resumed at 1:"; compare micro-1 a 2
echo "rl trainer dp: trained at 1 rank, resumed at 2:"; compare micro-1 b 2

# 3. The rank process killed mid-run: the step fails at once (the rank's connection closes),
#    naming it; `tlt run` starts the ranks again, resumes from the last checkpoint and finishes
#    with the steps of an uninterrupted run.
manifest dies "$spec" 2 3 > "$work/dies.yaml"
"$tlt" --threads 1 run "$work/dies.yaml" --baseline > "$work/dies.log" 2>&1 &
parent=$!
# Once step 1's checkpoint is written (its save gathers the ranks' optimizer shards: a kill
# during it leaves no checkpoint, and the run would start over).
for _ in $(seq 1 1800); do grep -q "checkpoint: $work/dies/.*step-1\$" "$work/dies.log" 2>/dev/null && break; sleep 0.1; done
rank=$(pgrep -f -P "$parent" "run-role" | head -1)
[ -n "$rank" ] || { kill -9 "$parent"; cat "$work/dies.log"; fail "no trainer rank process under tlt $parent"; }
kill -9 "$rank"
wait "$parent" || { cat "$work/dies.log"; fail "tlt run failed after its trainer rank was killed"; }
grep -q "the trainer group failed in .*data-parallel trainer 1 (pid $rank) was killed by signal 9" "$work/dies.log" ||
  { cat "$work/dies.log"; fail "no error naming the killed trainer rank"; }
grep -q "restart 1 of 2: the trainer ranks start again and the run resumes after step [12]" "$work/dies.log" ||
  { cat "$work/dies.log"; fail "the run did not resume from its checkpoint"; }
[ "$(ranks dies | cut -d' ' -f1)" = 2 ] || fail "the restarted run does not report 2 trainer ranks"
echo "rl trainer dp: killed rank $rank: $(grep -m1 "the trainer group failed" "$work/dies.log" | cut -c1-220)"
echo "rl trainer dp: the restarted run against 1 rank's uninterrupted steps:"; compare micro-1 dies

# 4. The pods: trainer 0 and 1 and a rollout pod as `tlt run-role` processes (speculation on, as a
#    cluster job runs; rollouts are lossless, so the steps still equal the --baseline run's).
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=$(free_port); group_port=$(free_port)
export TLT_JOB_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
manifest pods "$spec" 2 3 > "$work/pods.yaml"
role() {  # ROLE INDEX [ENV...]: a pod's process, its log $work/pod-ROLE-INDEX.log
  local r=$1 i=$2; shift 2
  env -u KUBECONFIG -u KUBERNETES_SERVICE_HOST TLT_JOB_FILE="$work/pods.yaml" TLT_ROLE="$r" \
    TLT_INDEX="$i" TLT_RENDEZVOUS_PORT="$port" TLT_TRAINER_ADDRESS=127.0.0.1 TLT_WEIGHT_SYNC=file \
    TLT_WORK_DIR="$work/pod-$r-$i" TLT_TRAINER_WORLD=2 "$@" "$tlt" --threads 1 run-role \
    > "$work/pod-$r-$i.log" 2>&1 &
}
role trainer 1 TLT_TRAINER_GROUP_ADDRESS="127.0.0.1:$group_port"; rank1=$!
role trainer 0 TLT_TRAINER_GROUP_ADDRESS="127.0.0.1:$group_port"; rank0=$!
role rollout 0; rollout=$!
wait "$rank0" || { cat "$work/pod-trainer-0.log" "$work/pod-trainer-1.log"; kill "$rank1" "$rollout" 2>/dev/null; fail "trainer pod 0 exited $?"; }
wait "$rank1" || { cat "$work/pod-trainer-1.log"; fail "trainer pod 1 exited $?"; }
wait "$rollout"
grep -q "trainer rank 1 of 2 at 127.0.0.1:$group_port" "$work/pod-trainer-1.log" &&
  grep -q "trainer rank 1 of 2 done" "$work/pod-trainer-1.log" ||
  fail "trainer pod 1 did not serve as rank 1: $(cat "$work/pod-trainer-1.log")"
echo "rl trainer dp: trainer pods 0 and 1 (run-role) against 1 local rank:"; compare micro-1 pods 1 tlt
