#!/usr/bin/env bash
# End-to-end RLJob benchmark, side by side in one run: the same seed and steps with TLT on
# (speculative rollouts + adaptive drafter trained on idle workers), with the drafter frozen
# after step 1, and off (--baseline). Two rollout workers, each pinned to its own core.
# Prints per-step wall time of each, their ratio, the share of idle worker-time reclaimed by
# drafter training, acceptance length per step (adaptive vs frozen), the reward curves, the
# rollout engines' time per phase, and the ceiling that the non-rollout part of the step puts
# on the end-to-end ratio.
# TLT and the baseline run REPEATS times each, alternating (baseline, TLT, baseline, ...); the
# faster run of each mode counts, as in bench/rollout: both do the same work (the rollouts are
# reproducible per seed), and another process's load only ever slows a run. Every run's total
# is printed too.
# Usage: bench/rl_e2e.sh [STEPS [REPEATS]]   (defaults 8 and 2)
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-8}
repeats=${2:-2}
out=${TLT_BENCH_OUT:-$(mktemp -d)}
mkdir -p "$out"
tlt=build/bin/tlt
mk() { sed -e "s|STEPS|$steps|" -e "s|OUT|$out/$1|" bench/rl_e2e.yaml > "$out/$1.yaml"; }
echo "rl_e2e: $steps steps, 2 workers, $repeats runs of each mode, results in $out" >&2
for r in $(seq 1 "$repeats"); do
  mk "baseline-$r"; mk "tlt-$r"
  "$tlt" run "$out/baseline-$r.yaml" --baseline > "$out/baseline-$r.log" 2>&1
  "$tlt" run "$out/tlt-$r.yaml" > "$out/tlt-$r.log" 2>&1
done
mk frozen
TLT_FREEZE_DRAFTER_AFTER=1 "$tlt" run "$out/frozen.yaml" > "$out/frozen.log" 2>&1
python3 - "$out" "$repeats" <<'PY'
import json, sys
o, repeats = sys.argv[1], int(sys.argv[2])
def total(rep): return sum(s["stepSeconds"] for s in rep["steps"])
def fastest(mode, label):
    runs = [json.load(open("%s/%s-%d/report/%s.json" % (o, mode, r, label)))
            for r in range(1, repeats + 1)]
    print("%s runs (s): %s" % (mode, ", ".join("%.1f" % total(x) for x in runs)))
    return min(runs, key=total)
base = fastest("baseline", "baseline")
tlt = fastest("tlt", "tlt")
frozen = json.load(open(o + "/frozen/report/tlt.json"))
print("%4s %9s %9s %6s | %9s %9s %6s | %7s %7s | %6s %6s" % (
    "step", "tlt_s", "base_s", "ratio", "tlt_roll", "base_roll", "ratio",
    "acc_ad", "acc_fz", "r_tlt", "r_base"))
for a, f, b in zip(tlt["steps"], frozen["steps"], base["steps"]):
    print("%4d %9.2f %9.2f %6.2f | %9.2f %9.2f %6.2f | %7.2f %7.2f | %6.3f %6.3f" % (
        a["step"], a["stepSeconds"], b["stepSeconds"], b["stepSeconds"] / a["stepSeconds"],
        a["rolloutSeconds"], b["rolloutSeconds"], b["rolloutSeconds"] / a["rolloutSeconds"],
        a["acceptLength"], f["acceptLength"], a["rewardMean"], b["rewardMean"]))
T = sum(s["stepSeconds"] for s in tlt["steps"]); B = sum(s["stepSeconds"] for s in base["steps"])
TR = sum(s["rolloutSeconds"] for s in tlt["steps"]); BR = sum(s["rolloutSeconds"] for s in base["steps"])
print("end-to-end (fastest of %d each): baseline %.1f s / TLT %.1f s = %.2fx (goal >= 1.7x)" % (
    repeats, B, T, B / T))
print("rollout phase: baseline %.1f s / TLT %.1f s = %.2fx" % (BR, TR, BR / TR))
# Amdahl: only the rollout phase speeds up, so the rest of the baseline's step (policy update,
# weight sync, step overhead) bounds the end-to-end ratio whatever the rollout speed.
rest = max(B - BR, 1e-9)
need = B / 1.7 - rest
print("ceiling: rollout is %.0f%% of the baseline's time, so even a zero-second rollout gives "
      "%.2fx end to end; %s" % (100 * BR / B, B / rest,
      "1.7x needs a %.2fx faster rollout phase" % (BR / need) if need > 0
      else "1.7x is out of reach at any rollout speed"))
idle, rec = tlt["idleWorkerSeconds"], tlt["reclaimedWorkerSeconds"]
print("idle worker-time reclaimed by drafter training: %.2f of %.2f worker-s = %.1f%% (goal >= 90%%)" % (
    rec, idle + rec, 100 * rec / max(idle + rec, 1e-9)))
base_idle = base["idleWorkerSeconds"]
print("baseline idle worker-time (nothing reclaims it): %.2f worker-s" % base_idle)
same = all(a["rewardMean"] == b["rewardMean"] for a, b in zip(tlt["steps"], base["steps"]))
print("reward curves identical (lossless, seeded): %s" % same)
# Where the rollout engines' generating worker-seconds went, per phase (reports since issue 20).
pt, pb = tlt.get("generatingPhaseSeconds", {}), base.get("generatingPhaseSeconds", {})
if pt or pb:
    names = [k for k in pt] + [k for k in pb if k not in pt]
    print("generating worker-s by phase (TLT / baseline): " + ", ".join(
        "%s %.2f/%.2f" % (k, pt.get(k, 0.0), pb.get(k, 0.0)) for k in names))
print("held-out reward: before %.3f, after TLT %.3f, after baseline %.3f" % (
    tlt["heldOutRewardBefore"], tlt["heldOutRewardAfter"], base["heldOutRewardAfter"]))
PY
