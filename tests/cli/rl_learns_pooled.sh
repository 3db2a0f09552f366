#!/usr/bin/env bash
# GRPO on the embedded default improves the held-out reward: over the seeds that rl_learns.sh
# ran, each held-out problem's difference (after - before) is averaged over seeds, and the paired
# 95% interval of the mean over problems (normal approximation, as runtime/rl/paired.h) must lie
# above 0. The interval is over problems for these runs; with three seeds it says little about
# the spread between training runs, which the per-seed lines show.
# Usage: rl_learns_pooled.sh OUT_DIR SEED...
set -u
out=$1; shift
python3 - "$out" "$@" <<'PY'
import json, math, sys
out, seeds = sys.argv[1], sys.argv[2:]
runs = []
for s in seeds:
    try:
        runs.append(json.load(open("%s/seed-%s.json" % (out, s))))
    except OSError:
        print("FAIL: no result for seed %s (cli.rl_learns.seed%s failed?)" % (s, s)); sys.exit(1)
n = len(runs[0]["before"])
if any(len(r["before"]) != n or len(r["after"]) != n for r in runs):
    print("FAIL: the seeds evaluated different numbers of problems"); sys.exit(1)
def interval(d):
    m = sum(d) / len(d)
    se = math.sqrt(sum((x - m) ** 2 for x in d) / (len(d) - 1) / len(d))
    return m, m - 1.959964 * se, m + 1.959964 * se
for r in runs:  # each run's own interval, as its report gave it
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
