#!/usr/bin/env python3
"""The report of bench/tst.sh: reads the runs it planned (plan.tsv) and their `tlt run`
reports, prints the tables and writes report.md, runs.tsv and loss-vs-flops.svg.

Usage: tst_report.py OUT BAG RATIO EQUAL_DATA_MULTIPLE MULTIPLES PRESET STEPS
"""
import json
import math
import os
import shutil
import statistics
import subprocess
import sys


def fmt_multiple(m):
    return ("%g" % m)


def iso_loss_multiple(curve, loss):
    """The compute multiple at which the baselines reach `loss` (interpolated in log compute),
    or a bound: ('<', smallest) when TST is worse than every baseline, ('>', largest) when
    better than every one."""
    if loss > curve[0][1]:
        return "<", curve[0][0]
    for (m0, l0), (m1, l1) in zip(curve, curve[1:]):
        if l0 >= loss >= l1 and l0 > l1:
            t = (l0 - loss) / (l0 - l1)
            return "=", math.exp(math.log(m0) + t * (math.log(m1) - math.log(m0)))
    return ">", curve[-1][0]


def show_multiple(kind, m):
    return {"<": "< %.2fx", "=": "%.2fx", ">": "> %.2fx"}[kind] % m


def main():
    out, bag, ratio, equal_data, multiples, preset, steps = sys.argv[1:8]
    multiples = [float(m) for m in multiples.split(",")]
    equal_data = float(equal_data)

    runs = {}  # (name, seed) -> dict
    for line in open(os.path.join(out, "plan.tsv")):
        name, seed, n, lr, sp, s, r, d = line.rstrip("\n").split("\t")
        report = json.load(open(os.path.join(d, "result.json")))
        points = report["tst" if sp == "true" else "baseline"]
        runs[(name, int(seed))] = {
            "name": name, "seed": int(seed), "steps": int(n), "lr": float(lr), "bag": int(s),
            "ratio": float(r), "superposition": sp == "true", "points": points,
            "loss": points[-1]["heldOutLoss"], "flops": points[-1]["flops"],
            "tokens": points[-1]["tokensSeen"], "dir": d}

    seeds = sorted({seed for (name, seed) in runs if name == "tst"})
    lines = []

    def say(s=""):
        print(s)
        lines.append(s)

    def baseline_curve(seed):
        """[(multiple, final held-out loss)] of the seed's baselines, by compute multiple."""
        curve = {}
        for m in multiples + [equal_data]:
            run = runs.get(("baseline-x%s" % fmt_multiple(m), seed))
            if run:
                curve[m] = run["loss"]
        return sorted(curve.items())








    main = runs[("tst", seeds[0])]
    say("# bench/tst: %s preset, TST s=%s r=%s vs next-token baseline, %s steps, peak lr %g, %d seeds"
        % (preset, bag, ratio, steps, main["lr"], len(seeds)))
    say()
    say("## Equal FLOPs: held-out next-token loss after %.3g training FLOPs" % main["flops"])
    say()
    say("| seed | TST | baseline 1x | TST - baseline | TST tokens read | baseline tokens read |")
    say("|---|---|---|---|---|---|")
    deltas, speedups = [], []
    for seed in seeds:
        t, b = runs[("tst", seed)], runs[("baseline-x1", seed)]
        if abs(t["flops"] - b["flops"]) > 1e-9 * b["flops"]:
            sys.exit("bench/tst: FLOPs differ between TST (%g) and the 1x baseline (%g)" %
                     (t["flops"], b["flops"]))
        deltas.append(t["loss"] - b["loss"])
        say("| %d | %.4f | %.4f | %+.4f | %d | %d |" % (seed, t["loss"], b["loss"], deltas[-1],
                                                      t["tokens"], b["tokens"]))
    wins = sum(d < 0 for d in deltas)
    say()
    say("TST lower at equal FLOPs in %d of %d seeds (goal: every seed); mean difference %+.4f nats"
        % (wins, len(seeds), statistics.mean(deltas)))
    say()
    say("## Iso-loss speedup: baselines of %s x the compute, each with its own full schedule"
        % ", ".join(fmt_multiple(m) for m in sorted(set(multiples + [equal_data]))))
    say()
    say("| seed | baseline final loss by compute multiple | TST | iso-loss speedup |")
    say("|---|---|---|---|")
    for seed in seeds:
        curve = baseline_curve(seed)
        t = runs[("tst", seed)]
        kind, m = iso_loss_multiple(curve, t["loss"])
        speedups.append((kind, m))
        say("| %d | %s | %.4f | %s |" % (seed, ", ".join("%gx %.4f" % (m_, l) for m_, l in curve),
                                         t["loss"], show_multiple(kind, m)))
    mean_curve = []
    for m, _ in baseline_curve(seeds[0]):
        mean_curve.append((m, statistics.mean(dict(baseline_curve(s))[m] for s in seeds)))
    mean_tst = statistics.mean(runs[("tst", s)]["loss"] for s in seeds)
    kind, m = iso_loss_multiple(mean_curve, mean_tst)
    say()
    say("Iso-loss speedup of the seed means: %s (goal: >= 1.5x; paper: 1.8x at 3B, 2.58x for the "
        "10B MoE)" % show_multiple(kind, m))
    say()
    say("## Equal data: the baseline that reads as many tokens as TST (%gx the steps)" % equal_data)
    say()
    say("| seed | TST | baseline %gx | TST - baseline |" % equal_data)
    say("|---|---|---|---|")
    ed = []
    for seed in seeds:
        t, b = runs[("tst", seed)], runs.get(("baseline-x%s" % fmt_multiple(equal_data), seed))
        ed.append(t["loss"] - b["loss"])
        say("| %d | %.4f | %.4f | %+.4f |" % (seed, t["loss"], b["loss"], ed[-1]))
    say()
    say("At equal data the %s wins (mean difference %+.4f nats; the paper: the baseline wins at 3B, "
        "2.640 vs 2.676)" % ("baseline" if statistics.mean(ed) > 0 else "TST", statistics.mean(ed)))
    sweep = sorted((r for r in runs.values() if r["name"].startswith("sweep-")),
                   key=lambda r: (r["bag"], r["ratio"]))
    if sweep:
        base = runs[("baseline-x1", seeds[0])]["loss"]
        say()
        say("## Sweep at seed %d: held-out loss minus the 1x baseline's (%.4f); negative = TST better"
            % (seeds[0], base))
        say()
        ratios = sorted({r["ratio"] for r in sweep})
        say("| s \\ r | " + " | ".join("%g" % r for r in ratios) + " |")
        say("|---|" + "---|" * len(ratios))
        for s in sorted({r["bag"] for r in sweep}):
            cells = []
            for r in ratios:
                run = next((x for x in sweep if x["bag"] == s and x["ratio"] == r), None)
                cells.append("%+.4f" % (run["loss"] - base) if run else "")
            say("| %d | %s |" % (s, " | ".join(cells)))

    with open(os.path.join(out, "runs.tsv"), "w") as f:
        f.write("name\tseed\tsteps\tlr\tbag\tratio\tflops\ttokens\theld_out_loss\tdir\n")
        for r in sorted(runs.values(), key=lambda r: (r["name"], r["seed"])):
            f.write("%s\t%d\t%d\t%g\t%d\t%g\t%.6g\t%d\t%.6f\t%s\n" % (
                r["name"], r["seed"], r["steps"], r["lr"], r["bag"], r["ratio"], r["flops"],
                r["tokens"], r["loss"], r["dir"]))
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")

    # Held-out loss against FLOPs, first seed: TST and every baseline (its own schedule).
    if shutil.which("gnuplot"):
        curves = [("TST s=%s r=%s" % (bag, ratio), runs[("tst", seeds[0])])]
        curves += [("baseline %gx" % m, runs[("baseline-x%s" % fmt_multiple(m), seeds[0])])
                   for m, _ in baseline_curve(seeds[0])]
        plot = []
        for i, (title, run) in enumerate(curves):
            path = os.path.join(out, "curve-%d.tsv" % i)
            with open(path, "w") as f:
                for p in run["points"]:
                    if p["flops"] > 0:
                        f.write("%.6g\t%.6f\n" % (p["flops"], p["heldOutLoss"]))
            plot.append("'%s' using 1:2 with linespoints title '%s'" % (path, title))
        svg = os.path.join(out, "loss-vs-flops.svg")
        script = ("set terminal svg size 900,560 dynamic background '#ffffff'\nset output '%s'\n"
                  "set logscale x\nset xlabel 'training FLOPs'\nset ylabel 'held-out next-token loss'\n"
                  "set title 'bench/tst (%s preset, seed %d)'\nset key top right\nplot %s\n"
                  % (svg, preset, seeds[0], ", ".join(plot)))
        subprocess.run(["gnuplot"], input=script.encode(), check=True)
        print("\npicture: %s" % svg)
    print("report: %s" % os.path.join(out, "report.md"))


if __name__ == "__main__":
    main()
