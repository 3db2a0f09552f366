#!/usr/bin/env bash
# spec.model.device at the start of a job (issue 54), for both kinds of job and `tlt generate`:
#   1. device: cuda where the build or the machine has no CUDA exits non-zero before any work:
#      the error names spec.model.device and what to do, and nothing ran (no scratch, no warm
#      start, no worker process, no report, no corpus read); `tlt generate --device cuda` the same,
#      naming --device. A build with CUDA and a visible device runs there instead: skipped.
#   2. device: auto prints the device chosen and why, and the report keeps it (RL: a run stopped
#      by SIGTERM before its first step still writes report.json; TST: a short run).
# Usage: device.sh TLT_BINARY SOURCE_DIR
set -u
tlt=$(realpath "$1"); src=$(realpath "$2")
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
rl_job() {  # rl_job NAME DEVICE -> $work/NAME.yaml, checkpoints under $work/NAME
  sed -e "s|PLACEHOLDER|$work/$1|" -e "s|METRICSPORT|0|" -e "s|^    preset: micro|&\n    device: $2|" \
    "$src/tests/manifests/e2e/rl-e2e.yaml" > "$work/$1.yaml"
  grep -q "device: $2" "$work/$1.yaml" || fail "could not set the device in $1.yaml"
}
tst_job() {  # tst_job NAME DEVICE STEPS
  sed -e "s|PLACEHOLDER|$work/$1|" -e "s|model: {preset: tiny}|model: {preset: tiny, device: $2}|" \
    -e "s|steps: 24|steps: $3|" -e "s|everySteps: 8|everySteps: 0|" \
    -e "s|warmupSteps: 4|warmupSteps: 2|" -e "s|evalEverySteps: 8|evalEverySteps: 0|" \
    "$src/tests/manifests/e2e/tst-e2e.yaml" > "$work/$1.yaml"
  grep -q "device: $2" "$work/$1.yaml" || fail "could not set the device in $1.yaml"
}

cuda_here=0
"$tlt" version | grep -q "^cuda yes devices=[1-9]" && cuda_here=1

# ---- 1. cuda without CUDA: refused before any work -----------------------------------------
if ((cuda_here)); then
  echo "SKIP: this build sees a CUDA device, so device: cuda runs (scripts/gpu-run.sh checks it)"
else
  for kind in rl tst; do
    if [[ $kind == rl ]]; then rl_job "$kind-cuda" cuda; else tst_job "$kind-cuda" cuda 8; fi
    start=$(date +%s%N)
    (cd "$work" && HOME="$work/home" "$tlt" run "$work/$kind-cuda.yaml" > "$work/$kind-cuda.out" 2> "$work/$kind-cuda.err")
    rc=$?
    ms=$((($(date +%s%N) - start) / 1000000))
    [[ $rc -ne 0 ]] || { cat "$work/$kind-cuda.out" "$work/$kind-cuda.err"; fail "$kind: device: cuda ran (exit 0)"; }
    grep -q "spec.model.device: cuda: " "$work/$kind-cuda.err" ||
      { cat "$work/$kind-cuda.err"; fail "$kind: the error does not name spec.model.device"; }
    grep -q "auto\|cpu" "$work/$kind-cuda.err" || fail "$kind: the error does not say what to do"
    # Nothing ran: no output beyond the error, no checkpoint or report directory, no cache.
    [[ ! -s $work/$kind-cuda.out ]] || { cat "$work/$kind-cuda.out"; fail "$kind: printed progress before failing"; }
    [[ ! -e $work/$kind-cuda && ! -e $work/.tlt && ! -e $work/home/.cache ]] ||
      { find "$work" -maxdepth 3 | head; fail "$kind: left files behind"; }
    echo "$kind: device: cuda refused in $ms ms, exit $rc: $(head -c 160 "$work/$kind-cuda.err")"
  done
  if "$tlt" generate --preset tiny --device cuda --max-tokens 2 > "$work/gen.out" 2> "$work/gen.err"; then
    fail "generate --device cuda ran"
  fi
  grep -q -- "--device: cuda: " "$work/gen.err" || { cat "$work/gen.err"; fail "generate: no --device error"; }
  ! grep -q . "$work/gen.out" || { cat "$work/gen.out"; fail "generate: generated before failing"; }
  echo "generate: --device cuda refused: $(head -c 120 "$work/gen.err")"
fi

# ---- 2. auto: the device chosen and why, in the log and the report ------------------------------
"$tlt" generate --preset tiny --device auto --max-tokens 2 > "$work/gen-auto.out" 2>&1 ||
  { cat "$work/gen-auto.out"; fail "generate --device auto failed"; }
line=$(grep -m1 "^device: " "$work/gen-auto.out") || { cat "$work/gen-auto.out"; fail "generate: no device line"; }
echo "generate: $line"

rl_job rl-auto auto
"$tlt" run "$work/rl-auto.yaml" > "$work/rl-auto.log" 2>&1 &
pid=$!
# Stopped once its run has started (the scratch line comes after the signal handlers): a run
# stopped before its first step still writes report.json.
for _ in $(seq 1 600); do
  grep -q "^tlt: scratch " "$work/rl-auto.log" && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
kill -TERM "$pid" 2>/dev/null
wait "$pid"
rc=$?
line=$(grep -m1 "^device: " "$work/rl-auto.log") || { cat "$work/rl-auto.log"; fail "rl: no device line"; }
[[ $line =~ ^device:\ (cpu\ \((this\ build\ has\ no\ CUDA|no\ CUDA\ device\ visible)|cuda) ]] ||
  fail "rl: the device line gives no reason: $line"
[[ $rc -eq 0 ]] || { cat "$work/rl-auto.log"; fail "rl: the stopped run exited $rc"; }
python3 - "$work/rl-auto/report/report.json" "${line#device: }" <<'PY' || exit 1
import json, sys
r = json.load(open(sys.argv[1]))
if r.get("device") != sys.argv[2]:
    print("FAIL: rl: report.json device %r, the log said %r" % (r.get("device"), sys.argv[2])); sys.exit(1)
PY
echo "rl: $line (and in report.json)"

tst_job tst-auto auto 8
"$tlt" run "$work/tst-auto.yaml" > "$work/tst-auto.log" 2>&1 || { cat "$work/tst-auto.log"; fail "tst: device: auto failed"; }
line=$(grep -m1 "^device: " "$work/tst-auto.log") || { cat "$work/tst-auto.log"; fail "tst: no device line"; }
python3 - "$work/tst-auto/report/report.json" "${line#device: }" <<'PY' || exit 1
import json, sys
r = json.load(open(sys.argv[1]))
if r.get("device") != sys.argv[2]:
    print("FAIL: tst: report.json device %r, the log said %r" % (r.get("device"), sys.argv[2])); sys.exit(1)
PY
echo "tst: $line (and in report.json)"
echo "PASS: device"
