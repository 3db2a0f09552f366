#!/usr/bin/env bash
# The embedded default, examples/rljob-tiny.yaml, run as a newcomer runs it but with
# spec.algorithm.seed = SEED: GRPO must raise the held-out reward above the warm start's, with a
# paired 95% interval (same problems, same sampling seeds before and after) whose lower bound is
# above 0. ctest runs it for three seeds, standing in for other machines' floats: nothing here
# relies on two runs producing the same numbers. --baseline trains exactly as TLT does (the
# rollouts and rewards are identical, checked by cli.rl_run), without speculation's cost.
# Usage: rl_learns.sh TLT_BINARY SOURCE_DIR SEED
set -u
tlt=$1; src=$2; seed=$3
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
sed -e "s|path: .tlt/rljob-tiny|path: $work/ckpt|" -e "s|port: 9400|port: 0|" \
  -e "s|^    seed: 0 *\$|    seed: $seed|" "$src/examples/rljob-tiny.yaml" > "$work/job.yaml"
grep -q "^    seed: $seed\$" "$work/job.yaml" || { echo "FAIL: could not set spec.algorithm.seed"; exit 1; }
"$tlt" run "$work/job.yaml" --baseline > "$work/out.log" 2>&1 || { cat "$work/out.log"; echo "FAIL: exit $?"; exit 1; }
grep "held-out reward" "$work/out.log"
python3 - "$work/ckpt/report/baseline.json" "$seed" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
h = r["heldOut"]
print("rljob-tiny seed %s: held-out reward %.3f -> %.3f after %d steps, difference %+.3f, "
      "95%% CI [%+.3f, %+.3f] over %d problems x %d samples"
      % (sys.argv[2], h["before"], h["after"], len(r["steps"]), h["difference"], h["ci95"][0],
         h["ci95"][1], h["problems"], h["samplesPerProblem"]))
if h["problems"] < 64: print("FAIL: fewer than 64 held-out problems"); sys.exit(1)
if not h["ci95"][0] > 0: print("FAIL: the interval's lower bound is not above 0: no clear improvement"); sys.exit(1)
PY
