#!/usr/bin/env bash
# GRPO on the embedded default improves the held-out reward: over the seeds that rl_learns.sh
# ran, each held-out problem's difference (after - before) is averaged over seeds, and the paired
# 95% interval of the mean over problems (normal approximation, as runtime/rl/paired.h, computed
# by rl_learns_check.py's interval()) must lie above 0. Like each seed's, it checks the reward (a
# marked, correct answer), which this default raises by marking answers. The interval is over
# problems for these runs; with three seeds it says little about the spread between training
# runs, which the per-seed lines show.
# Usage: rl_learns_pooled.sh OUT_DIR SEED...
set -u
out=$1; shift
python3 - "$(dirname "$0")" "$out" "$@" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[1])
from rl_learns_check import interval
out, seeds = sys.argv[2], sys.argv[3:]
runs = []
for s in seeds:
    try:
        runs.append(json.load(open("%s/seed-%s.json" % (out, s))))
    except OSError:
        print("FAIL: no result for seed %s (cli.rl_learns.seed%s failed?)" % (s, s)); sys.exit(1)
n = len(runs[0]["before"])
if any(len(r["before"]) != n or len(r["after"]) != n for r in runs):
    print("FAIL: the seeds evaluated different numbers of problems"); sys.exit(1)
for r in runs:  # each run's interval, recomputed from its per-problem rewards (rl_learns_check.py)
    lo, hi = r["ci95"]
    print("seed %d: before %.3f after %.3f difference %+.3f, 95%% CI [%+.3f, %+.3f]%s"
          % (r["seed"], sum(r["before"]) / n, sum(r["after"]) / n, r["difference"], lo, hi,
             "" if lo > 0 else "  (this seed alone: no clear improvement)"))
pooled = [sum(r["after"][i] - r["before"][i] for r in runs) / len(runs) for i in range(n)]
m, lo, hi = interval(pooled)
print("pooled over %d seeds, paired over %d problems: difference %+.4f, 95%% CI [%+.4f, %+.4f]"
      % (len(runs), n, m, lo, hi))
if not lo > 0: print("FAIL: the pooled interval's lower bound is not above 0"); sys.exit(1)
PY
