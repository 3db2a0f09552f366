#!/usr/bin/env bash
# `tlt bench rollout` at toy size: it tokenizes (or reuses) the corpus, trains and caches a tiny
# target, warm-starts its drafter with the jobs' warm start (rl::load_or_train_drafter_on_
# generations: the measuring process loads what the preparing one cached), and prints the
# side-by-side table for every batch size, each arm alone, and the bandit's statistics; without
# bench_rollout beside tlt it says what to build.
# Usage: bench_rollout.sh TLT_BINARY
set -u
tlt=$1
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# A device this build or machine lacks: refused before any work, naming the flag (cuda:99 is
# out of range on any machine).
"$tlt" bench rollout --preset tiny --device cuda:99 > "$work/nodev" 2>&1; rc=$?
[ "$rc" = 1 ] || { cat "$work/nodev"; fail "--device cuda:99 exited $rc, expected 1"; }
grep -q -- "--device" "$work/nodev" || { cat "$work/nodev"; fail "the refusal does not name --device"; }
grep -q "target: " "$work/nodev" && { cat "$work/nodev"; fail "--device cuda:99 trained a target"; }
bench=$(dirname "$tlt")/bench_rollout
"$bench" --model /nonexistent --ceiling-only --device cuda:99 > "$work/nodev" 2>&1; rc=$?
[ "$rc" = 2 ] || { cat "$work/nodev"; fail "bench_rollout --device cuda:99 exited $rc, expected 2"; }
grep -q -- "--device" "$work/nodev" || { cat "$work/nodev"; fail "bench_rollout's refusal does not name --device"; }
echo "bench rollout: --device cuda:99 refused at start"

"$tlt" bench rollout --preset tiny --train-steps 20 --drafter-steps 10 --batches 1,3 \
  --fixed-batches 1 --max-new 24 --waves 2 --repeats 1 --show-bandit > "$work/out" 2>&1 \
  || { rc=$?; cat "$work/out"; fail "tlt bench rollout exited $rc"; }
python3 - "$work/out" <<'PY' || { cat "$work/out"; exit 1; }
import re, sys
text = open(sys.argv[1]).read()
def fail(m): print("FAIL:", m); sys.exit(1)
rows = {int(m.group(1)): (float(m.group(2)), float(m.group(3)), float(m.group(4)))
        for m in re.finditer(r"^\s+(\d+)\s+(?:(?:last|fused)\s+)?([\d.]+)\s+([\d.]+)\s+([\d.]+)x", text, re.M)}
if sorted(rows) != [1, 3]: fail("rows for batches %s, expected 1 and 3" % sorted(rows))
for b, (plain, tlt, ratio) in rows.items():
    if plain <= 0 or tlt <= 0: fail("batch %d: throughput %s" % (b, rows[b]))
    if abs(tlt / plain - ratio) > 0.01: fail("batch %d: ratio %.2f is not %.1f / %.1f" % (b, ratio, tlt, plain))
for arm in ("4_1_5", "6_1_7", "4_2_8", "ngram"):
    if not re.search(r"fixed\s+(?:(?:last|fused)\s+)?%s\s+[\d.]+\s+[\d.]+x" % arm, text): fail("no fixed-arm line for " + arm)
if "bandit b=1 drafting (tok/s):" not in text: fail("no bandit statistics")
if not re.search(r"^device: (cpu|cuda)", text, re.M): fail("no device line")
if not re.search(r"^drafter \(features=last\): loaded \S+/drafter/generations-\d+\.ckpt", text, re.M):
    fail("the measuring process did not load the drafter from the jobs' warm start cache")
print("bench rollout: batches 1 and 3 measured, ratios %s" % {b: r[2] for b, r in rows.items()})
PY

# Alone, without its sibling binaries: a clear message and EX_UNAVAILABLE.
cp "$tlt" "$work/tlt"
"$work/tlt" bench rollout > "$work/alone" 2>&1; rc=$?
[ "$rc" = 69 ] || { cat "$work/alone"; fail "exit $rc without bench_rollout, expected 69"; }
grep -q "bench_rollout not found" "$work/alone" || { cat "$work/alone"; fail "no clear message"; }
echo "bench rollout: a lone tlt names the missing binary"
