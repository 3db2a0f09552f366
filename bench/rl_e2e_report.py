#!/usr/bin/env python3
"""bench/rl_e2e.sh's report, for both of its modes (the micro preset and --model PATH).

  rl_e2e_report.py ceiling REPORT_JSON --goal X
      The Amdahl ceiling of one baseline run's report (<run>/report/baseline.json): only the
      rollout phase speeds up, so the rest of the step bounds the end-to-end ratio.
  rl_e2e_report.py report DIR REPEATS --goal X --reclaim-goal P [--frozen]
      The side-by-side report over DIR/baseline-R and DIR/tlt-R (R = 1..REPEATS; the fastest of
      each mode counts) and, with --frozen, DIR/frozen (the drafter frozen after step 1).
"""
import argparse
import json
import sys


def total(rep, key="stepSeconds"):
    return sum(s[key] for s in rep["steps"])


def print_ceiling(base, goal, what):
    B, BR = total(base), total(base, "rolloutSeconds")
    rest = max(B - BR, 1e-9)
    need = B / goal - rest
    update = total(base, "updateSeconds")
    publish = sum(s.get("publishSeconds", 0.0) for s in base["steps"])
    # The rest of a step besides the update: rewards, writing the new policy for the workers
    # (publishSeconds), the drafter merge, the step's bookkeeping.
    print("ceiling (%s): rollout is %.0f%% of the baseline's time (%.1f of %.1f s; policy update "
          "%.1f s, the rest %.1f s of which %.1f s writing the new policy), so even a zero-second "
          "rollout gives %.2fx end to end; %s" % (
              what, 100 * BR / B, BR, B, update, rest - update, publish, B / rest,
              "%.2gx needs a %.2fx faster rollout phase" % (goal, BR / need) if need > 0
              else "%.2gx is out of reach at any rollout speed" % goal))


def fastest(o, mode, label, repeats):
    runs = [json.load(open("%s/%s-%d/report/%s.json" % (o, mode, r, label)))
            for r in range(1, repeats + 1)]
    print("%s runs (s): %s" % (mode, ", ".join("%.1f" % total(x) for x in runs)))
    return min(runs, key=total)


def report(o, repeats, goal, reclaim_goal, with_frozen):
    base = fastest(o, "baseline", "baseline", repeats)
    tlt = fastest(o, "tlt", "tlt", repeats)
    frozen = json.load(open(o + "/frozen/report/tlt.json")) if with_frozen else None
    print("%4s %9s %9s %6s | %9s %9s %6s | %11s | %7s %7s | %6s %6s" % (
        "step", "tlt_s", "base_s", "ratio", "tlt_roll", "base_roll", "ratio", "len_p50/max",
        "acc_ad", "acc_fz" if frozen else "", "r_tlt", "r_base"))
    frozen_steps = frozen["steps"] if frozen else [None] * len(tlt["steps"])
    for a, f, b in zip(tlt["steps"], frozen_steps, base["steps"]):
        lengths = "%d/%d" % (b["responseTokens"]["p50"], b["responseTokens"]["max"])
        print("%4d %9.2f %9.2f %6.2f | %9.2f %9.2f %6.2f | %11s | %7.2f %7s | %6.3f %6.3f" % (
            a["step"], a["stepSeconds"], b["stepSeconds"], b["stepSeconds"] / a["stepSeconds"],
            a["rolloutSeconds"], b["rolloutSeconds"], b["rolloutSeconds"] / a["rolloutSeconds"],
            lengths, a["acceptLength"], "%.2f" % f["acceptLength"] if f else "",
            a["rewardMean"], b["rewardMean"]))
    T, B = total(tlt), total(base)
    TR, BR = total(tlt, "rolloutSeconds"), total(base, "rolloutSeconds")
    print("end-to-end (fastest of %d each): baseline %.1f s / TLT %.1f s = %.2fx (goal >= %.2gx)" % (
        repeats, B, T, B / T, goal))
    print("rollout phase: baseline %.1f s / TLT %.1f s = %.2fx" % (BR, TR, BR / TR))
    print_ceiling(base, goal, "the fastest baseline run")
    idle, rec = tlt["idleWorkerSeconds"], tlt["reclaimedWorkerSeconds"]
    print("idle worker-time reclaimed by drafter training: %.2f of %.2f worker-s = %.1f%% "
          "(goal >= %g%%)" % (rec, idle + rec, 100 * rec / max(idle + rec, 1e-9), reclaim_goal))
    print("baseline idle worker-time (nothing reclaims it): %.2f worker-s" % base["idleWorkerSeconds"])
    same = all(a["rewardMean"] == b["rewardMean"] for a, b in zip(tlt["steps"], base["steps"]))
    same_tokens = all(a["tokens"] == b["tokens"] and a["responseTokens"] == b["responseTokens"]
                      for a, b in zip(tlt["steps"], base["steps"]))
    print("reward curves identical (lossless, seeded): %s (generated token counts and lengths "
          "identical: %s)" % (same, same_tokens))
    acc = [s["acceptLength"] for s in tlt["steps"]]
    spec = [x for x in acc if x > 0]  # 0: the step never speculated
    print("acceptance length (TLT, tokens per verification): %s; mean %s over the steps that "
          "speculated" % (", ".join("%.2f" % x for x in acc),
                          "%.2f" % (sum(spec) / len(spec)) if spec else "-"))
    # What the bandits chose below the activation threshold, summed over the workers: steps
    # verified per arm, and "plain" where a bandit chose not to draft.
    print("bandit choices (TLT): " + "; ".join(
        "step %d: %s" % (a["step"], ", ".join("%s %d" % kv for kv in sorted(
            a.get("arms", {}).items(), key=lambda kv: -kv[1])) or "none")
        for a in tlt["steps"]))
    # spec.speculative.selector.pooled: the other workers' bandit steps each worker counted.
    print("bandit steps pooled between workers (TLT, per step): " + ", ".join(
        "%d" % a.get("banditStepsAbsorbed", 0) for a in tlt["steps"]))
    # Where the rollout engines' generating worker-seconds went, per phase.
    pt, pb = tlt.get("generatingPhaseSeconds", {}), base.get("generatingPhaseSeconds", {})
    if pt or pb:
        names = [k for k in pt] + [k for k in pb if k not in pt]
        print("generating worker-s by phase (TLT / baseline): " + ", ".join(
            "%s %.2f/%.2f" % (k, pt.get(k, 0.0), pb.get(k, 0.0)) for k in names))
    if base["heldOut"]["problems"]:  # spec.task.heldOut: 0 (the model mode) skips it
        print("held-out reward: before %.3f, after TLT %.3f, after baseline %.3f" % (
            tlt["heldOutRewardBefore"], tlt["heldOutRewardAfter"], base["heldOutRewardAfter"]))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("ceiling")
    c.add_argument("report_json")
    c.add_argument("--goal", type=float, required=True)
    r = sub.add_parser("report")
    r.add_argument("dir")
    r.add_argument("repeats", type=int)
    r.add_argument("--goal", type=float, required=True)
    r.add_argument("--reclaim-goal", type=float, required=True)
    r.add_argument("--frozen", action="store_true")
    a = p.parse_args()
    if a.command == "ceiling":
        print_ceiling(json.load(open(a.report_json)), a.goal, "baseline run 1, before TLT's")
    else:
        report(a.dir, a.repeats, a.goal, a.reclaim_goal, a.frozen)


if __name__ == "__main__":
    sys.exit(main())
