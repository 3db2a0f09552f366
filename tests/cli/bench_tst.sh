#!/usr/bin/env bash
# bench/tst.sh end to end at toy size (micro preset, 12 steps, 2 seeds, one sweep cell): every
# planned run happens, the report's tables are complete, TST and the 1x baseline spent equal
# FLOPs while TST read more tokens, a second invocation reuses every cached run, and the
# iso-loss interpolation reads the compute multiple correctly on hand-made curves.
# Usage: bench_tst.sh TLT_BINARY SOURCE_DIR
set -u
tlt=$1; src=$2
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
bench() {
  TLT_BIN=$(dirname "$tlt") TLT_BENCH_CACHE=$work/cache "$src/bench/tst.sh" --preset micro \
    --steps 12 --seeds 2 --multiples 1,2 --sweep-bags 2 --sweep-ratios 0.5 -j 2 --out "$work/out"
}
bench > "$work/first.log" 2>&1 || { rc=$?; cat "$work/first.log"; fail "bench/tst.sh exited $rc"; }
grep -q "runs to do" "$work/first.log" || fail "nothing ran"
for section in "## Equal FLOPs" "## Iso-loss speedup" "## Equal data" "## Sweep at seed 1"; do
  grep -q "^$section" "$work/out/report.md" || { cat "$work/out/report.md"; fail "no '$section'"; }
done
python3 - "$work/out/runs.tsv" <<'PY' || exit 1
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
names = sorted({r["name"] for r in rows})
want = ["baseline-x1", "baseline-x1.9", "baseline-x2", "sweep-s2-r0.5", "tst"]
if names != want: sys.exit("FAIL: runs %s, want %s" % (names, want))
by = {(r["name"], r["seed"]): r for r in rows}
for seed in ("1", "2"):
    t, b = by[("tst", seed)], by[("baseline-x1", seed)]
    if t["flops"] != b["flops"]: sys.exit("FAIL: FLOPs differ: %s vs %s" % (t["flops"], b["flops"]))
    if int(t["tokens"]) <= int(b["tokens"]): sys.exit("FAIL: TST read no more text")
    if by[("baseline-x2", seed)]["steps"] != "24": sys.exit("FAIL: the 2x baseline is not 24 steps")
print("bench_tst: %d runs, equal FLOPs, TST read %s vs %s tokens" % (
    len(rows), by[("tst", "1")]["tokens"], by[("baseline-x1", "1")]["tokens"]))
PY
bench > "$work/second.log" 2>&1 || { rc=$?; cat "$work/second.log"; fail "second invocation exited $rc"; }
grep -q "runs to do" "$work/second.log" && fail "the second invocation reran cached runs"
cmp -s <(grep -v '^picture' "$work/first.log" | grep '^|') <(grep '^|' "$work/second.log") ||
  fail "the cached runs gave other tables"
PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$src/bench python3 - <<'PY' || exit 1
from tst_report import iso_loss_multiple as iso
curve = [(1, 5.0), (1.4, 4.8), (2.5, 4.4)]
checks = [(iso(curve, 5.1), ("<", 1)), (iso(curve, 4.3), (">", 2.5)), (iso(curve, 5.0), ("=", 1.0))]
kind, m = iso(curve, 4.6)  # halfway between 1.4x and 2.5x in loss: their geometric mean
checks.append(((kind, round(m, 6)), ("=", round((1.4 * 2.5) ** 0.5, 6))))
for got, want in checks:
    if got[0] != want[0] or abs(got[1] - want[1]) > 1e-9: raise SystemExit("FAIL: iso %s != %s" % (got, want))
print("bench_tst: iso-loss interpolation checked")
PY
echo "PASS: bench_tst"
