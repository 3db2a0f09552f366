#!/usr/bin/env bash
# The embedded default, examples/rljob-tiny.yaml, run as a newcomer runs it but with
# spec.algorithm.seed = SEED (each seed its own warm start and RL run, standing in for another
# machine's floats; nothing here relies on two runs producing the same numbers). Prints the run's
# paired held-out comparison (same problems, same sampling seeds before and after) and leaves
# each problem's before/after in OUT_DIR/seed-SEED.json for rl_learns_pooled.sh. Fails when the
# run fails, the comparison is malformed or disagrees with its per-problem rewards, or the 95%
# interval recomputed from those rewards has its lower bound not above 0 (RL did not clearly
# improve the held-out reward on this seed). The reward pays a marked, correct answer; what RL
# improves on this default is the marking (rl_learns_check.py says which is checked).
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
python3 "$(dirname "$0")/rl_learns_check.py" "$work/ckpt/report/baseline.json" "$seed" \
  "$out/seed-$seed.json"
