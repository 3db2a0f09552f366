#!/usr/bin/env bash
# The embedded default, examples/rljob-tiny.yaml, run as a newcomer runs it but with
# spec.algorithm.seed = SEED (each seed its own warm start and RL run, standing in for another
# machine's floats; nothing here relies on two runs producing the same numbers). Prints the run's
# paired held-out comparison (same problems, same sampling seeds before and after) and leaves
# each problem's before/after in OUT_DIR/seed-SEED.json for rl_learns_pooled.sh. Fails when the
# run fails, the comparison is malformed, or the 95% interval's lower bound is not above 0 (RL did
# not clearly improve the held-out reward on this seed).
# --baseline trains exactly as TLT does (rollouts and rewards are identical, checked by
# cli.rl_run) without speculation's cost.
# Usage: rl_learns.sh TLT_BINARY SOURCE_DIR SEED OUT_DIR
set -u
tlt=$1; src=$2; seed=$3; out=$4
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
mkdir -p "$out"; rm -f "$out/seed-$seed.json"
sed -e "s|path: .tlt/rljob-tiny|path: $work/ckpt|" -e "s|port: 9400|port: 0|" \
  -e "s|^    seed: 0 *\$|    seed: $seed|" "$src/examples/rljob-tiny.yaml" > "$work/job.yaml"
grep -q "^    seed: $seed\$" "$work/job.yaml" || { echo "FAIL: could not set spec.algorithm.seed"; exit 1; }
"$tlt" run "$work/job.yaml" --baseline > "$work/out.log" 2>&1 || { cat "$work/out.log"; echo "FAIL: exit $?"; exit 1; }
grep "held-out reward" "$work/out.log"
python3 - "$work/ckpt/report/baseline.json" "$seed" "$out/seed-$seed.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
h = r["heldOut"]
lo, hi = h["ci95"]
print("rljob-tiny seed %s: held-out reward %.3f -> %.3f after %d steps, difference %+.3f, "
      "95%% CI [%+.3f, %+.3f] over %d problems x %d samples; answers marked %.1f%% -> %.1f%%, "
      "reward per marked answer %.3f -> %.3f"
      % (sys.argv[2], h["before"], h["after"], len(r["steps"]), h["difference"], lo, hi,
         h["problems"], h["samplesPerProblem"], 100 * h["markedBefore"], 100 * h["markedAfter"],
         h["before"] / max(h["markedBefore"], 1e-9), h["after"] / max(h["markedAfter"], 1e-9)))
if h["problems"] < 64: print("FAIL: fewer than 64 held-out problems"); sys.exit(1)
if len(h["beforePerProblem"]) != h["problems"] or len(h["afterPerProblem"]) != h["problems"]:
    print("FAIL: the report's per-problem rewards do not match its problem count"); sys.exit(1)
if not lo <= h["difference"] <= hi: print("FAIL: the interval does not contain the mean"); sys.exit(1)
if not 0 <= h["markedBefore"] <= 1 or not 0 <= h["markedAfter"] <= 1:
    print("FAIL: the report's shares of marked answers are missing or out of [0, 1]"); sys.exit(1)
if not lo > 0:
    print("FAIL: no clear improvement on this seed (the interval's lower bound is not above 0)")
    sys.exit(1)
json.dump({"seed": int(sys.argv[2]), "difference": h["difference"], "ci95": h["ci95"],
           "before": h["beforePerProblem"], "after": h["afterPerProblem"]}, open(sys.argv[3], "w"))
PY
