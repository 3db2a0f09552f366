#!/usr/bin/env bash
# The embedded default, examples/rljob-tiny.yaml, run as a newcomer runs it: GRPO must raise
# the held-out reward (4 seeded samples per problem at the rollout temperature) above the warm
# start's. Runs are seeded end to end, so on one machine the numbers repeat exactly.
# Usage: rl_learns.sh TLT_BINARY SOURCE_DIR
set -u
tlt=$1; src=$2
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
sed -e "s|path: .tlt/rljob-tiny|path: $work/ckpt|" -e "s|port: 9400|port: 0|" \
  "$src/examples/rljob-tiny.yaml" > "$work/job.yaml"
"$tlt" run "$work/job.yaml" > "$work/out.log" 2>&1 || { cat "$work/out.log"; echo "FAIL: exit $?"; exit 1; }
python3 - "$work/ckpt/report/tlt.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
before, after = r["heldOutRewardBefore"], r["heldOutRewardAfter"]
print("rljob-tiny: held-out reward %.3f (warm start) -> %.3f after %d steps" % (before, after, len(r["steps"])))
if not after > before: print("FAIL: the policy did not improve on the held-out set"); sys.exit(1)
PY
