#!/usr/bin/env bash
# gpu-run.sh: the one device run of issue 44 (docs/gpu.md, "The device run"), made of one call per
# part while the machine stays warm, because the model and the drafter (scripts/gpu-carry.sh) need
# two carries and a prebuilt GPU-flavour tlt (scripts/gpu-bundle.sh) a third:
#   scripts/gpu-run.sh receive   every call but the last: stores the carried part(s) outside the
#                                tree (the next call's carry would drop them); unless the stored
#                                bundle carries runtime_test and bench_cuda_verify built against
#                                this machine's torch, builds the GPU flavour's core so the last
#                                call finds it built (gpu-check.sh's steps 1-5; a no-op once built).
#   scripts/gpu-run.sh           the last call: stores its part, joins all parts and checks
#                                SHA256SUMS, then, with one PASS/FAIL/SKIP line each:
#     1. payload   model.gguf, drafter.ckpt, bundle/ (and googletest.tar.gz -> .cache/googletest
#                  for gpu-check.sh, taken in by any call).
#     1b. device   whether an NVIDIA device is visible (/dev/nvidia*, nvidia-smi). Without one the
#                  run stops here with exit 2 once the job manifests of step 4 (device: cuda) are
#                  written and pass `tlt validate` (the bundle's tlt, else build/bin/tlt):
#                  nothing to measure, so no minutes are spent building (GPU_RUN_CHECK_ON_CPU=1
#                  goes on to gpu-check.sh's CPU-side steps, which end with exit 2 too).
#     2. check     scripts/gpu-check.sh: the bundle's prebuilt test binaries when they fit this
#                  torch (GPU_CHECK_PREBUILT), else the build; the Cuda.*/CudaGraphPool.* tests
#                  (graph replay equals eager for verify and for drafting, chain and tree), then
#                  bench_cuda_verify --engine in bfloat16 at batch 1/4/16/64 (plain with graphs
#                  vs EAGLE and adaptive with graphed drafting; draft replays and eager fallbacks
#                  counted). Without a CUDA device it stops here (exit 2).
#     3. bench     the rollout bench on the real model with the carried drafter at temperature
#                  0.7, batches 1, 16 and 64: bench/rollout.sh --model SmolLM2 --device cuda
#                  --temperature 0.7 --batches 1,16,64 with TLT_BIN the GPU-flavour `tlt`
#                  carried as its own part (bundle.tar.gz from
#                  scripts/gpu-bundle.sh, GPU_CARRY_BUNDLE; unpacked into payload/bundle, its
#                  tlt-env sourced): graphed plain vs each arm and adaptive, their ratios printed;
#                  SKIP (blocked) without a bundle, or while its bench_rollout has no --device
#                  option (it would measure the host's CPU).
#     4. jobs      `tlt run --compare` of examples/rljob-smollm2.yaml (3 steps) and
#                  examples/tst-tiny.yaml with spec.model.device: cuda, same bundle; each must
#                  print "device: cuda..."; prints the RL run's step rewards against the
#                  baseline's (identical: speculation is lossless), the end-to-end and rollout
#                  speed-ups, TST's held-out loss against the baseline's at equal FLOPs, and
#                  every tlt_gpu_busy_ratio series of the job's metrics.prom.
# Logs and tables go to $OUT/gpu-run (the device call returns it), else to a temp dir.
# Exit status: 0 all passed; 1 something failed; 2 no CUDA device (CPU-side steps passed);
# 3 parts still missing (a receive call, or a call whose carry lacked a part; with a bundle,
# SHA256SUMS names bundle.tar.gz and it counts as a part).
# Environment: GPU_RUN_STORE (default ~/.cache/tlt/gpu-carry-parts), GPU_RUN_CHECK_BENCH_ARGS
# (bench_cuda_verify's flags in step 2), GPU_RUN_ROLLOUT_ARGS (step 3's flags after --model and
# --device), GPU_RUN_BENCH_TIMEOUT (seconds of step 3, default 200), GPU_RUN_JOBS=0 (step 4
# skipped), GPU_RUN_JOB_TIMEOUT (seconds per job of step 4, default 300), GPU_RUN_DEADLINE
# (seconds from the call's start that bound every step, default 500), GPU_RUN_CHECK_ON_CPU=1,
# TLT_PYTHON (the torch to compare the bundle's with, default python3), and gpu-check.sh's
# (GPU_CHECK_SUITE_TIMEOUT defaults to 0 here: the CPU suite runs in CI).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
mode=${1:-all}
store=${GPU_RUN_STORE:-$HOME/.cache/tlt/gpu-carry-parts}
carried=.cache/gpu-carry
payload=.cache/gpu-payload
if [[ -n ${OUT:-} ]]; then log=$OUT/gpu-run; else log=$(mktemp -d /tmp/tlt-gpu-run.XXXXXX); fi
mkdir -p "$log" "$store"
failed=0
# Every step's timeout is cut to what is left before GPU_RUN_DEADLINE seconds (default 500) from
# the call's start, so the call ends with its logs inside the run tool's limit (540 s in
# docs/gpu.md).
deadline=${GPU_RUN_DEADLINE:-500}
left() {  # SECONDS: that, or what is left before the deadline if less
  local l=$((deadline - SECONDS))
  echo $(($1 < l ? $1 : (l > 0 ? l : 1)))
}
pass() { echo "PASS: $1"; }
fail() { echo "FAIL: $1"; failed=1; }
skip() { echo "SKIP: $1"; }

# ---- 0. carry: keep what came, join when complete --------------------------------------------
receive() {
  local f n have=0
  [[ -f $carried/SHA256SUMS ]] && cp "$carried/SHA256SUMS" "$carried/PARTS" "$store/"
  for f in "$carried"/part-*; do
    [[ -f $f ]] || continue
    if (cd "$carried" && grep " $(basename "$f")\$" SHA256SUMS | sha256sum -c --quiet -); then
      cp "$f" "$store/" && echo "received $(basename "$f") ($(du -h "$f" | cut -f1))"
    else
      fail "carry: $(basename "$f") does not match SHA256SUMS"
    fi
  done
  if [[ -f $carried/bundle.tar.gz ]]; then
    if (cd "$carried" && grep " bundle.tar.gz\$" SHA256SUMS | sha256sum -c --quiet -); then
      cp "$carried/bundle.tar.gz" "$store/" && echo "received bundle.tar.gz ($(du -h "$store/bundle.tar.gz" | cut -f1))"
    else
      fail "carry: bundle.tar.gz does not match SHA256SUMS"
    fi
  fi
  local gt=$carried/googletest.tar.gz
  if [[ -f $gt && ! -f .cache/googletest/CMakeLists.txt ]] &&
    (cd "$carried" && grep " googletest.tar.gz\$" SHA256SUMS | sha256sum -c --quiet -); then
    mkdir -p .cache && tar -C .cache -xzf "$gt"  # for gpu-check.sh on a device without gtest
  fi
  [[ -f $store/PARTS ]] || { echo "no part carried yet"; return 3; }
  n=$(cat "$store/PARTS")
  for i in $(seq 1 "$n"); do [[ -f $store/part-$i ]] && have=$((have + 1)); done
  if grep -q " bundle.tar.gz\$" "$store/SHA256SUMS"; then  # the bundle is a part too
    n=$((n + 1))
    (cd "$store" && grep " bundle.tar.gz\$" SHA256SUMS | sha256sum -c --quiet - 2>/dev/null) &&
      have=$((have + 1))
  fi
  echo "parts: $have of $n in $store"
  ((have == n)) || return 3
}
join() {
  local n
  n=$(cat "$store/PARTS")
  rm -rf "$payload" && mkdir -p "$payload"
  for i in $(seq 1 "$n"); do cat "$store/part-$i"; done >"$store/carry.tar"
  if ! (cd "$store" && grep " carry.tar\$" SHA256SUMS | sha256sum -c --quiet -); then
    fail "payload: the joined tar does not match SHA256SUMS"
    return 1
  fi
  tar -C "$payload" -xf "$store/carry.tar" && rm -f "$store/carry.tar"
  # gpu-bundle.sh's DIR, whatever its name, as payload/bundle (receive checked its sum).
  if grep -q " bundle.tar.gz\$" "$store/SHA256SUMS"; then
    mkdir -p "$payload/bundle" &&
      tar -C "$payload/bundle" --strip-components=1 -xzf "$store/bundle.tar.gz" ||
      { fail "payload: cannot unpack bundle.tar.gz"; return 1; }
  fi
  pass "payload: $(tr '\n' ';' <"$payload/SOURCES")$([[ -d $payload/bundle ]] && echo ' bundle')"
}

# The bundle's CUDA tests (gpu-bundle.sh's tests/) run here when built against this machine's
# torch (MANIFEST's "torch X" is torch.__version__ here): then nothing is compiled on the device.
device_torch=$(${TLT_PYTHON:-python3} -c 'import torch; print(torch.__version__)' 2>/dev/null)
bundle_torch() {  # FILE: a bundle.tar.gz, or its unpacked MANIFEST
  if [[ $1 == *.tar.gz ]]; then tar -xzOf "$1" --wildcards '*/MANIFEST' 2>/dev/null; else cat "$1"; fi |
    sed -n '1s/.*, torch \([^,]*\),.*/\1/p'
}
prebuilt_fits() {  # FILE: whether its tests/ can run on this machine's torch
  [[ -n $device_torch && $(bundle_torch "$1") == "$device_torch" ]] || return 1
  # grep reads the whole list: grep -q would end tar with SIGPIPE, a failure under pipefail.
  [[ $1 != *.tar.gz ]] || tar -tzf "$1" | grep '/tests/runtime_test$' >/dev/null
}

receive
received=$?
if [[ $mode == receive ]]; then
  if [[ -f $store/bundle.tar.gz ]] && prebuilt_fits "$store/bundle.tar.gz"; then
    echo "build: none needed (the bundle's runtime_test and bench_cuda_verify are built against" \
      "torch $device_torch, this machine's)"
  else
    # Build now (no device steps) so that the last call's check finds everything compiled.
    GPU_CHECK_BENCH=0 GPU_CHECK_SUITE_TIMEOUT=0 GPU_CHECK_BUILD_ONLY=1 scripts/gpu-check.sh \
      >"$log/build.log" 2>&1
    grep -E "^(PASS|FAIL|SKIP)|^gpu-check" "$log/build.log"
  fi
  exit "$received"
fi
if ((received == 3)); then
  fail "payload: parts missing (call 1 first: scripts/gpu-run.sh receive, see docs/gpu.md)"
  exit 3
fi
join || exit 1

# ---- 1b. the job manifests of step 4, and whether there is a device at all ----------------------
tlt=$payload/bundle/bin/tlt
validate() {  # this tree's tlt, else the bundle's with its libraries (in a subshell)
  if [[ -x build/bin/tlt ]]; then
    build/bin/tlt validate "$@"
  elif [[ -x $tlt ]]; then
    (source "$payload/bundle/tlt-env" && "$tlt" validate "$@")
  else
    echo "no tlt to validate with (build/bin/tlt, the bundle's)" && return 3
  fi
}
job_files=(examples/rljob-smollm2.yaml examples/tst-tiny.yaml)
[[ ${GPU_RUN_JOBS:-1} == 0 ]] && job_files=()
specs=()
manifests="no job manifests"
for job in "${job_files[@]}"; do
  spec=$log/$(basename "$job" .yaml)-cuda.yaml
  # device: cuda, checkpoints and reports under the log (they come back with $OUT); RL 3 steps.
  sed -e 's/^\(  model:\)$/\1\n    device: cuda/' \
    -e "s|^\(    path: \)\.tlt/\(.*\)$|\1$log/ckpt-\2|" \
    -e '/kind: RLJob/,$ {s/^\(    steps:\).*/\1 3/}' "$job" >"$spec"
  specs+=("$spec")
done
if ((${#specs[@]})); then
  validate "${specs[@]}" >"$log/validate.log" 2>&1
  rc=$?
  if ((rc == 3)); then
    skip "manifests: $(cat "$log/validate.log")"
    manifests="job manifests not validated"
  elif ((rc == 0)) &&
    [[ $(grep -l "^    device: cuda$" "${specs[@]}" | wc -l) -eq ${#specs[@]} ]]; then
    pass "manifests: ${#specs[@]} job(s) with device: cuda, valid"
    manifests="job manifests valid"
  else
    cat "$log/validate.log"
    fail "manifests: the jobs of step 4 are not valid"
  fi
fi
device_visible() {
  compgen -G "/dev/nvidia[0-9]*" >/dev/null || nvidia-smi -L 2>/dev/null | grep -q "^GPU "
}
if ! device_visible && [[ -z ${GPU_RUN_CHECK_ON_CPU:-} ]]; then
  ((failed)) && { echo "gpu-run: FAIL (logs in $log)"; exit 1; }
  echo "gpu-run: no CUDA device: stopped after the CPU-side steps (carry joined and checked," \
    "$manifests); nothing to measure here"
  exit 2
fi

# ---- 2. CUDA tests (prebuilt, else built), the synthetic-target bench -----------------------------
prebuilt=""
if [[ -f $payload/bundle/MANIFEST ]] && prebuilt_fits "$payload/bundle/MANIFEST" &&
  [[ -x $payload/bundle/tests/runtime_test ]]; then
  prebuilt=$payload/bundle/tests
fi
(
  [[ -z $prebuilt ]] || source "$payload/bundle/tlt-env"  # their libraries, as for tlt
  GPU_CHECK_PREBUILT=$prebuilt GPU_CHECK_SUITE_TIMEOUT=${GPU_CHECK_SUITE_TIMEOUT:-0} \
    GPU_CHECK_BENCH_ARGS=${GPU_RUN_CHECK_BENCH_ARGS:---engine --dtype bfloat16 --batches 1,4,16,64} \
    timeout "$(left 240)" scripts/gpu-check.sh
) 2>&1 | tee "$log/gpu-check.log"
rc=${PIPESTATUS[0]}
if ((rc == 2)); then
  tests="CUDA tests built"
  [[ -z $prebuilt ]] || tests="CUDA tests of the bundle"
  echo "gpu-run: no CUDA device: stopped after the CPU-side steps (carry joined and checked," \
    "$tests)"
  exit 2
fi
((rc == 0)) && pass "check: scripts/gpu-check.sh" || fail "check: scripts/gpu-check.sh (exit $rc)"

# ---- 3-4. the real model and the jobs: a GPU-flavour tlt is needed --------------------------------
if [[ ! -x $tlt ]]; then
  why="no GPU-flavour tlt in the payload (the device builds the core only: tlt needs yaml-cpp,"
  why+=" cpprestsdk, prometheus-cpp and the Rust tokenizers; carry one with GPU_CARRY_BUNDLE)"
  skip "bench: blocked: $why"
  skip "jobs: blocked: $why"
else
  # The bundle's libraries and the device torch's lib folder (RPATH $ORIGIN/../lib finds the former).
  source "$payload/bundle/tlt-env"
  echo "bundle: $(head -1 "$payload/bundle/MANIFEST"); $("$tlt" version 2>&1 | grep -m1 -i cuda)"
  mkdir -p "$HOME/.cache/tlt/models" "$HOME/.cache/tlt/drafter"
  cp -rn "$payload/bundle/cache/." "$HOME/.cache/tlt/"  # the TST job's tokenized corpus
  # Linked in where absent: a machine that has them keeps its own (same names, same sums).
  link_in() { [[ -e $2 ]] || ln -s "$(realpath "$1")" "$2"; }
  link_in "$payload/model.gguf" "$HOME/.cache/tlt/models/SmolLM2-135M-Instruct.Q4_1.gguf"
  # The drafter under the name it had here: the bench's cache looks it up by that key (without
  # one carried, the bench's warm start trains it first, inside the step's time).
  if [[ -f $payload/drafter.ckpt ]]; then
    link_in "$payload/drafter.ckpt" \
      "$HOME/.cache/tlt/drafter/$(awk '$1 == "drafter" {print $2}' "$payload/SOURCES")"
  fi
  # The issue's command, with the bundle's tlt (its bench_rollout beside it) and the GGUF linked
  # in above. A bench that cannot decode on the GPU would measure the host's CPU.
  rollout=(--model SmolLM2 --device cuda ${GPU_RUN_ROLLOUT_ARGS:---temperature 0.7 --batches 1,16,64})
  if ! "$payload/bundle/bin/bench_rollout" --help 2>&1 | grep -- "--device" >/dev/null; then
    skip "bench: blocked: bench_rollout decodes on the CPU only (it has no --device option)"
  elif (($(left 400) < 30)); then
    fail "bench: no time left in this call (GPU_RUN_DEADLINE)"
  elif echo "bench: bench/rollout.sh ${rollout[*]}" &&
    TLT_BIN=$tlt timeout "$(left "${GPU_RUN_BENCH_TIMEOUT:-200}")" bench/rollout.sh "${rollout[@]}" \
      >"$log/bench.log" 2>&1; then
    # The tables: every ratio of speculation against graphed plain decoding, per batch.
    grep -v "^  drafter step\|^  curve" "$log/bench.log" | tail -40
    pass "bench: SmolLM2 on cuda (log $log/bench.log)"
  else
    tail -20 "$log/bench.log"
    fail "bench: SmolLM2 on cuda (see $log/bench.log)"
  fi
  for spec in "${specs[@]}"; do
    name=$(basename "$spec" .yaml)
    report=$log/ckpt-${name%-cuda}/report
    if (($(left 300) < 30)); then
      fail "jobs: $name: no time left in this call (GPU_RUN_DEADLINE)"
      continue
    fi
    if ! timeout "$(left "${GPU_RUN_JOB_TIMEOUT:-300}")" "$tlt" run "$spec" --compare \
      >"$log/$name.log" 2>&1; then
      fail "jobs: $name --compare (see $log/$name.log)" && tail -20 "$log/$name.log"
      continue
    fi
    line=$(grep -m1 "^device: " "$log/$name.log")
    [[ $line == "device: cuda"* ]] || fail "jobs: $name did not run on cuda: ${line:-no device line}"
    echo "$name: $line"
    # Every ratio of the comparison, and the busy ratios the job's metrics ended with.
    python3 - "$report" <<'PY' || fail "jobs: $name: the comparison (above)"
import json, os, sys
d = sys.argv[1]
r = json.load(open(os.path.join(d, "report.json")))
ok = True
if r["kind"] == "RLJob":
    t, b = (json.load(open(os.path.join(d, l + ".json"))) for l in ("tlt", "baseline"))
    rt, rb = [s["rewardMean"] for s in t["steps"]], [s["rewardMean"] for s in b["steps"]]
    same = rt == rb
    ok = same
    print("  rewards per step: tlt %s, baseline %s: %s" % (rt, rb, "identical" if same else "DIFFER"))
    roll = lambda j: sum(s["rolloutSeconds"] for s in j["steps"])
    print("  end to end: baseline %.1f s / tlt %.1f s = %.2fx; rollout %.1f s / %.1f s = %.2fx" % (
        r["baseline"]["totalSeconds"], r["tlt"]["totalSeconds"],
        r["baseline"]["totalSeconds"] / max(r["tlt"]["totalSeconds"], 1e-9),
        roll(b), roll(t), roll(b) / max(roll(t), 1e-9)))
    print("  accept length per step: %s" % [round(s.get("acceptLength", 0), 2) for s in t["steps"]])
else:
    t, b = r["tst"][-1], r["baseline"][-1]
    print("  held-out loss at %.3g FLOPs: tst %.3f, baseline %.3f (tst/baseline %.3f); tokens %d vs %d" % (
        t["flops"], t["heldOutLoss"], b["heldOutLoss"], t["heldOutLoss"] / b["heldOutLoss"],
        t["tokensSeen"], b["tokensSeen"]))
for label in ("tlt", "baseline", "tst"):
    if isinstance(r.get(label), dict) and "gpuBusyRatio" in r[label]:
        print("  %s: gpuBusyRatio %.3f (from the %s)" % (
            label, r[label]["gpuBusyRatio"], r[label].get("gpuBusyFrom", "clock")))
prom = os.path.join(d, "metrics.prom")
busy = [l.strip() for l in open(prom)] if os.path.exists(prom) else []
busy = [l for l in busy if l.startswith("tlt_gpu_busy_ratio")]
print("  " + ("\n  ".join(busy) if busy else "no tlt_gpu_busy_ratio series in metrics.prom"))
sys.exit(0 if ok else 1)
PY
    pass "jobs: $name --compare on cuda (log $log/$name.log, report $report)"
  done
  ((${#specs[@]})) || skip "jobs: GPU_RUN_JOBS=0"
fi
((failed)) && { echo "gpu-run: FAIL (logs in $log)"; exit 1; }
echo "gpu-run: PASS (logs in $log)"
