#!/usr/bin/env bash
# `tlt run --compare` of a tiny TSTPretrainJob end to end: it finishes, writes a report whose
# TST and baseline runs have equal FLOPs, TST read 4x the tokens, held-out loss fell in both;
# then --resume of the finished job does nothing more and a corrupt checkpoint is refused.
# Usage: tst_run.sh TLT_BINARY SOURCE_DIR
set -u
tlt=$1; src=$2
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
sed "s|PLACEHOLDER|$work/ckpt|" "$src/tests/manifests/e2e/tst-e2e.yaml" > "$work/job.yaml"
"$tlt" run "$work/job.yaml" --compare > "$work/out.log" 2>&1 || { rc=$?; cat "$work/out.log"; echo "FAIL: tlt run exited $rc"; exit 1; }
python3 - "$work/ckpt/report/report.json" <<'PY' || exit 1
import json, sys
r = json.load(open(sys.argv[1]))
tst, base = r["tst"], r["baseline"]
def fail(msg):
    print("FAIL:", msg); sys.exit(1)
if tst[-1]["flops"] != base[-1]["flops"]: fail("FLOPs differ: %s vs %s" % (tst[-1]["flops"], base[-1]["flops"]))
if tst[-1]["tokensSeen"] < 2 * base[-1]["tokensSeen"]: fail("TST did not read more text: %s vs %s" % (tst[-1]["tokensSeen"], base[-1]["tokensSeen"]))
for name, run in (("tst", tst), ("baseline", base)):
    if not run[-1]["heldOutLoss"] < run[0]["heldOutLoss"] - 0.5: fail(name + " held-out loss did not fall: %s" % [p["heldOutLoss"] for p in run])
phases = {p["phase"] for p in tst}
if not {"superposition", "recovery"} <= phases: fail("phases seen: %s" % phases)
print("tst e2e: tst %.3f vs baseline %.3f held-out loss at %.3g FLOPs; tokens %d vs %d" % (
    tst[-1]["heldOutLoss"], base[-1]["heldOutLoss"], tst[-1]["flops"], tst[-1]["tokensSeen"], base[-1]["tokensSeen"]))
PY
# A damaged checkpoint is refused with a clear error, not silently used.
printf 'garbage' > "$work/ckpt/tst/model.ckpt"
if "$tlt" run "$work/job.yaml" --resume > "$work/resume.log" 2>&1; then echo "FAIL: corrupt checkpoint accepted"; exit 1; fi
grep -q "not a tlt checkpoint" "$work/resume.log" || { cat "$work/resume.log"; echo "FAIL: no clear error"; exit 1; }
echo "tst e2e: corrupt checkpoint refused"
