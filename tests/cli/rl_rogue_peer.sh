#!/usr/bin/env bash
# Issue 51: a rogue peer on a cluster RLJob trainer's rendezvous port. The job runs as `tlt
# run-role` processes on loopback (as tests/cli/run_role.sh does: a trainer and two rollout pods
# holding the job secret in TLT_JOB_SECRET); tests/cli/rogue_peer.cc, without the secret, first
# captures a real rollout pod's hello (posing as a trainer), then attacks the real trainer from
# before the pods start until the job ends: hellos as worker 0 without a proof, with a wrong one
# and replaying the captured one, each followed by op:file frames for policy-v0.ckpt and ../x and
# forged replies; a silent connection every second; 300 hellos for unknown indexes.
# Checks: the rogue is let in nowhere (every hello refused, every flood connection closed); no
# file it sent exists anywhere; the trainer says how many connections it closed and its step
# report counts them (unpairedConnections); the job finishes within its budget despite the
# silent connections, and its per-step rewards, tokens and held-out reward equal a local `tlt
# run` of the same job (same seed): nothing the rogue sent was trained on. Then a trainer waiting
# for pods that never come, under the same attack, stops at once on SIGTERM (exit 0).
# Usage: rl_rogue_peer.sh TLT_BINARY ROGUE_PEER_BINARY SOURCE_DIR
set -u
tlt=$1
rogue=$2
src=$(cd "$3" && pwd)
fail() { echo "FAIL: rl_rogue_peer: $*"; exit 1; }
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; [[ -n ${KEEP:-} ]] || rm -rf "$work"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=$(free_port)
fake_port=$(free_port)
budget_s=400  # the trainer, from its port opening to its exit (the job alone takes a fraction)
# Weights travel as files over the channel (the worker side's mirroring rules at work each step).
export TLT_WEIGHT_SYNC=file
export TLT_JOB_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
mk() {  # NAME: the e2e job, its checkpoints (and, with TLT_RUN_SCRATCH=job, its run dir) under $work/NAME
  sed -e "s|PLACEHOLDER|$work/$1|" -e "s|METRICSPORT|0|" "$src/tests/manifests/e2e/rl-e2e.yaml" > "$work/$1.yaml"
}
mk local
mk pods
"$tlt" run "$work/local.yaml" > "$work/local.log" 2>&1 || { tail "$work/local.log"; fail "local tlt run failed"; }

pod() {  # INDEX PORT LOG: a rollout pod holding the secret
  env TLT_JOB_FILE="$work/pods.yaml" TLT_ROLE=rollout TLT_INDEX="$1" TLT_NAMESPACE=research \
    TLT_RENDEZVOUS_PORT="$2" TLT_TRAINER_ADDRESS=127.0.0.1 TLT_WORK_DIR="$work/pod-$1" \
    "$tlt" run-role > "$3" 2>&1 &
  pids+=($!)
}
wait_for() {  # FILE PATTERN SECONDS
  for _ in $(seq $(($3 * 10))); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  return 1
}

# 1. A real rollout pod's hello, captured by the rogue posing as the trainer.
"$rogue" capture "$fake_port" "$work/hello.txt" > "$work/capture.log" 2>&1 &
capture=$!
wait_for "$work/capture.log" "capture: listening" 10 || fail "the rogue could not listen"
pod 0 "$fake_port" "$work/victim.log"
victim=${pids[-1]}
wait $capture || { cat "$work/capture.log" "$work/victim.log"; fail "no hello captured"; }
kill "$victim" 2>/dev/null
grep -q '"proof"' "$work/hello.txt" || fail "the captured hello carries no proof: $(cat "$work/hello.txt")"

# 2. The job, attacked from before its pods connect until it ends.
env -u KUBECONFIG -u KUBERNETES_SERVICE_HOST TLT_JOB_FILE="$work/pods.yaml" TLT_ROLE=trainer \
  TLT_INDEX=0 TLT_NAMESPACE=research TLT_RENDEZVOUS_PORT="$port" TLT_RUN_SCRATCH=job \
  "$tlt" run-role > "$work/trainer.log" 2>&1 &
trainer=$!
pids+=($trainer)
"$rogue" attack "$port" 900 "$work/hello.txt" > "$work/rogue.log" 2>&1 &
attacker=$!
pids+=($attacker)
wait_for "$work/rogue.log" "rogue: port open" 300 || { tail "$work/trainer.log"; fail "the trainer never listened"; }
opened=$SECONDS
sleep 2  # the rogue's first hellos as worker 0 come before the real worker 0's
pod 0 "$port" "$work/rollout-0.log"
pod 1 "$port" "$work/rollout-1.log"
while kill -0 $trainer 2>/dev/null && ((SECONDS - opened < budget_s)); do sleep 1; done
if kill -0 $trainer 2>/dev/null; then
  tail -20 "$work/trainer.log"; fail "the job did not finish within ${budget_s} s of its port opening"
fi
wait $trainer
rc=$?
elapsed=$((SECONDS - opened))
((rc == 0)) || { tail -20 "$work/trainer.log"; fail "the trainer exited $rc"; }
wait $attacker
rogue_rc=$?
cat "$work/rogue.log"
((rogue_rc == 0)) || fail "the rogue got in (exit $rogue_rc)"

# 3. What the rogue tried, and what it left.
for what in "no proof" "wrong proof" "replayed hello"; do
  n=$(sed -n "s/^rogue: takeover ($what): \([0-9]*\) refused.*/\1/p" "$work/rogue.log")
  [[ -n $n ]] && ((n > 0)) || fail "no hello with $what was refused"
done
grep -q "^rogue: flood: 300 hellos for unknown indexes, 300 closed by the trainer, 0 let in" "$work/rogue.log" ||
  fail "the flood's connections were not all closed"
if grep -rl "ROGUE-MARKER" "$work" --exclude=rogue.log; then fail "a file the rogue sent was written"; fi
[[ ! -e "$work/pods/tlt/x" && ! -e "$work/pods/x" ]] || fail "the rogue wrote ../x"
grep -q "connections closed without a valid hello" "$work/trainer.log" ||
  { tail -20 "$work/trainer.log"; fail "the trainer did not report the connections it closed"; }
for i in 0 1; do
  grep -q "connected; files under" "$work/rollout-$i.log" || { cat "$work/rollout-$i.log"; fail "rollout $i never connected"; }
done
python3 - "$work/local/report" "$work/pods/report" "$elapsed" <<'PY' || fail "the attacked run differs from the local run"
import json, sys
a = json.load(open(sys.argv[1] + "/tlt.json")); b = json.load(open(sys.argv[2] + "/tlt.json"))
key = lambda s: (s["step"], s["rewardMean"], s["tokens"], s["responseTokens"]["max"])
ka, kb = [key(s) for s in a["steps"]], [key(s) for s in b["steps"]]
assert ka == kb, "steps differ:\n local %s\n pods  %s" % (ka, kb)
ra, rb = json.load(open(sys.argv[1] + "/report.json")), json.load(open(sys.argv[2] + "/report.json"))
assert ra["tlt"]["heldOutRewardAfter"] == rb["tlt"]["heldOutRewardAfter"], (ra["tlt"], rb["tlt"])
unpaired = [s.get("unpairedConnections", 0) for s in b["steps"]]
# The flood's 300 at least, each closed by the trainer as it refused it (not at its exit).
assert sum(unpaired) >= 300, "the step reports count %s closed connections" % unpaired
print("rl_rogue_peer: %d steps identical to the local run (rewards %s) with the rogue attacking; "
      "%s s from the port opening to the end; unpaired connections per step %s"
      % (len(kb), [round(k[1], 3) for k in kb], sys.argv[3], unpaired))
PY

# 4. SIGTERM while the trainer waits for its rollout pods, under attack: it stops at once.
mk stop
stop_port=$(free_port)
env -u KUBECONFIG -u KUBERNETES_SERVICE_HOST TLT_JOB_FILE="$work/stop.yaml" TLT_ROLE=trainer \
  TLT_INDEX=0 TLT_NAMESPACE=research TLT_RENDEZVOUS_PORT="$stop_port" \
  "$tlt" run-role > "$work/stop.log" 2>&1 &
trainer=$!
pids+=($trainer)
"$rogue" attack "$stop_port" 60 "$work/hello.txt" > "$work/rogue-stop.log" 2>&1 &
pids+=($!)
wait_for "$work/rogue-stop.log" "rogue: port open" 300 || { tail "$work/stop.log"; fail "the second trainer never listened"; }
sleep 3
kill -TERM $trainer
for _ in $(seq 100); do kill -0 $trainer 2>/dev/null || break; sleep 0.1; done
if kill -0 $trainer 2>/dev/null; then
  kill -9 $trainer; tail "$work/stop.log"; fail "the trainer ignored SIGTERM for 10 s while under attack"
fi
wait $trainer
rc=$?
((rc == 0)) && grep -q "stopped by signal" "$work/stop.log" ||
  { tail "$work/stop.log"; fail "the trainer stopped by SIGTERM exited $rc without saying why"; }
echo "PASS: rl_rogue_peer"
