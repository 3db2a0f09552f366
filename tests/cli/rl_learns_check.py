#!/usr/bin/env python3
"""One seed's check for cli.rl_learns: did RL raise the held-out reward on this seed?

The interval is recomputed here from the report's raw per-problem rewards (heldOut.beforePerProblem
and afterPerProblem, each a problem's mean reward over its samples), as runtime/rl/paired.h
defines it, and the report's own interval and means must agree with it; the verdict uses the
recomputed interval, so a report that overstates its interval fails.

What it checks, marking vs. correctness: a preset's reward pays only a correct answer that is
marked ("Answer: 7"), so a higher reward means more answers both marked and right. On the
embedded default the warm start leaves half its answers unmarked, and the gain RL makes is in
marking (heldOut.markedBefore -> markedAfter); the reward per marked answer, the nearest thing
the report has to correctness, is printed beside it and not checked.

Usage: rl_learns_check.py REPORT_JSON SEED OUT_JSON
  Writes OUT_JSON ({seed, difference, ci95, before, after}) for rl_learns_pooled.sh when it passes.
"""
import json
import math
import sys

Z95 = 1.959964  # runtime/rl/paired.cc


def interval(d):
    """(mean, lo, hi): the 95% interval of mean(d), normal approximation, Bessel's sd."""
    m = sum(d) / len(d)
    se = math.sqrt(sum((x - m) ** 2 for x in d) / (len(d) - 1) / len(d))
    return m, m - Z95 * se, m + Z95 * se


def fail(why):
    print("FAIL: " + why)
    sys.exit(1)


def main(report_path, seed, out_path):
    r = json.load(open(report_path))
    h = r["heldOut"]
    before, after = h["beforePerProblem"], h["afterPerProblem"]
    n = h["problems"]
    if n < 64:
        fail("fewer than 64 held-out problems")
    if len(before) != n or len(after) != n:
        fail("the report's per-problem rewards do not match its problem count")
    if any(not 0 <= x <= 1 for x in before + after):
        fail("a per-problem reward is outside [0, 1]")
    m, lo, hi = interval([a - b for a, b in zip(after, before)])
    rep_lo, rep_hi = h["ci95"]
    reported = [h["difference"], rep_lo, rep_hi, h["before"], h["after"]]
    recomputed = [m, lo, hi, sum(before) / n, sum(after) / n]
    if any(abs(a - b) > 1e-9 for a, b in zip(reported, recomputed)):
        fail("the report's difference %+.6f, 95%% CI [%+.6f, %+.6f] disagree with its per-problem "
             "rewards: %+.6f, [%+.6f, %+.6f]" % (h["difference"], rep_lo, rep_hi, m, lo, hi))
    if not 0 <= h["markedBefore"] <= 1 or not 0 <= h["markedAfter"] <= 1:
        fail("the report's shares of marked answers are missing or out of [0, 1]")
    print("rljob-tiny seed %s: held-out reward %.3f -> %.3f after %d steps, difference %+.3f, "
          "95%% CI [%+.3f, %+.3f] (recomputed from %d problems x %d samples)"
          % (seed, h["before"], h["after"], len(r["steps"]), m, lo, hi, n, h["samplesPerProblem"]))
    print("  checks that the reward (paid for a marked, correct answer) rose; marking: answers "
          "marked %.1f%% -> %.1f%%; correctness, not checked: reward per marked answer %.3f -> %.3f"
          % (100 * h["markedBefore"], 100 * h["markedAfter"],
             h["before"] / max(h["markedBefore"], 1e-9), h["after"] / max(h["markedAfter"], 1e-9)))
    if not lo > 0:
        fail("no clear improvement on this seed (the recomputed interval's lower bound is not "
             "above 0)")
    json.dump({"seed": int(seed), "difference": m, "ci95": [lo, hi], "before": before,
               "after": after}, open(out_path, "w"))


if __name__ == "__main__":
    main(*sys.argv[1:4])
