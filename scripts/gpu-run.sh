#!/usr/bin/env bash
# gpu-run.sh: the one device run of issue 44 (docs/gpu.md, "The device run"), made of one call per
# part while the machine stays warm, because the model and the drafter (scripts/gpu-carry.sh) need
# two carries and a prebuilt GPU-flavour tlt (scripts/gpu-bundle.sh) a third:
#   scripts/gpu-run.sh receive   every call but the last: stores the carried part(s) outside the
#                                tree (the next call's carry would drop them), then builds the GPU
#                                flavour's core so the last call finds it built (gpu-check.sh's
#                                steps 1-5; a no-op once built).
#   scripts/gpu-run.sh           the last call: stores its part, joins all parts and checks
#                                SHA256SUMS, then, with one PASS/FAIL/SKIP line each:
#     1. payload   model.gguf, drafter.ckpt, bundle/ (and googletest.tar.gz -> .cache/googletest
#                  for gpu-check.sh, taken in by any call).
#     2. check     scripts/gpu-check.sh: build, the Cuda.*/CudaGraphPool.* tests (graph replay
#                  equals eager for verify and for drafting, chain and tree), then
#                  bench_cuda_verify --engine in bfloat16 at batch 1/4/16/64 (plain with graphs
#                  vs EAGLE and adaptive with graphed drafting; draft replays and eager fallbacks
#                  counted). Without a CUDA device it stops here (exit 2).
#     3. bench     the rollout bench on the real model with the trained drafter, temperature 0 and
#                  0.7, graphed plain vs adaptive: runs a GPU-flavour `tlt` carried as its own part
#                  (bundle.tar.gz from scripts/gpu-bundle.sh, GPU_CARRY_BUNDLE; unpacked into
#                  payload/bundle, its tlt-env sourced); SKIP (blocked) without one, or while
#                  bench_rollout has no --device option (it would measure the host's CPU).
#     4. jobs      `tlt run` of examples/rljob-smollm2.yaml and examples/tst-tiny.yaml with
#                  spec.model.device: cuda and 2 steps, TLT and --baseline; same bundle.
# Logs and tables go to $OUT/gpu-run (the device call returns it), else to a temp dir.
# Exit status: 0 all passed; 1 something failed; 2 no CUDA device (CPU-side steps passed);
# 3 parts still missing (a receive call, or a call whose carry lacked a part; with a bundle,
# SHA256SUMS names bundle.tar.gz and it counts as a part).
# Environment: GPU_RUN_STORE (default ~/.cache/tlt/gpu-carry-parts), GPU_RUN_BENCH_ARGS,
# GPU_RUN_BENCH_TIMEOUT (seconds per temperature of step 3, default 150), GPU_RUN_JOBS=0 (step 4
# skipped: see docs/gpu.md on spec.model.device),
# and gpu-check.sh's (GPU_CHECK_SUITE_TIMEOUT defaults to 0 here: the CPU suite runs in CI).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
mode=${1:-all}
store=${GPU_RUN_STORE:-$HOME/.cache/tlt/gpu-carry-parts}
carried=.cache/gpu-carry
payload=.cache/gpu-payload
if [[ -n ${OUT:-} ]]; then log=$OUT/gpu-run; else log=$(mktemp -d /tmp/tlt-gpu-run.XXXXXX); fi
mkdir -p "$log" "$store"
failed=0
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

receive
received=$?
if [[ $mode == receive ]]; then
  # Build now (no device steps) so that the second call's check finds everything compiled.
  GPU_CHECK_BENCH=0 GPU_CHECK_SUITE_TIMEOUT=0 GPU_CHECK_BUILD_ONLY=1 scripts/gpu-check.sh \
    >"$log/build.log" 2>&1
  grep -E "^(PASS|FAIL|SKIP)|^gpu-check" "$log/build.log"
  exit "$received"
fi
if ((received == 3)); then
  fail "payload: parts missing (call 1 first: scripts/gpu-run.sh receive, see docs/gpu.md)"
  exit 3
fi
join || exit 1

# ---- 2. build, CUDA tests, the synthetic-target bench --------------------------------------------
GPU_CHECK_SUITE_TIMEOUT=${GPU_CHECK_SUITE_TIMEOUT:-0} \
  GPU_CHECK_BENCH_ARGS=${GPU_RUN_BENCH_ARGS:---engine --dtype bfloat16 --batches 1,4,16,64} \
  scripts/gpu-check.sh 2>&1 | tee "$log/gpu-check.log"
rc=${PIPESTATUS[0]}
if ((rc == 2)); then
  echo "gpu-run: no CUDA device: stopped after the CPU-side steps (carry joined and checked, built)"
  exit 2
fi
((rc == 0)) && pass "check: scripts/gpu-check.sh" || fail "check: scripts/gpu-check.sh (exit $rc)"

# ---- 3-4. the real model and the jobs: a GPU-flavour tlt is needed --------------------------------
tlt=$payload/bundle/bin/tlt
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
  # The drafter under the name it had here: the bench's cache looks it up by that key.
  link_in "$payload/drafter.ckpt" \
    "$HOME/.cache/tlt/drafter/$(awk '$1 == "drafter" {print $2}' "$payload/SOURCES")"
  bench=$payload/bundle/bin/bench_rollout
  # A bench that cannot decode on the GPU would spend the call's time measuring the host's CPU.
  if ! "$bench" --help 2>&1 | grep -q -- "--device"; then
    skip "bench: blocked: bench_rollout decodes on the CPU only (it has no --device option)"
  else
    for temp in 0 0.7; do
      if timeout "${GPU_RUN_BENCH_TIMEOUT:-150}" "$bench" --device cuda \
        --model "$HOME/.cache/tlt/models/SmolLM2-135M-Instruct.Q4_1.gguf" --dtype bfloat16 \
        --batches 1,4,16,64 --temperature "$temp" >"$log/bench-t$temp.log" 2>&1; then
        pass "bench: temperature $temp (table in $log/bench-t$temp.log)" && tail -12 "$log/bench-t$temp.log"
      else
        fail "bench: temperature $temp (see $log/bench-t$temp.log)"
      fi
    done
  fi
  job_files=(examples/rljob-smollm2.yaml examples/tst-tiny.yaml)
  [[ ${GPU_RUN_JOBS:-1} == 0 ]] && skip "jobs: GPU_RUN_JOBS=0" && job_files=()
  for job in "${job_files[@]}"; do
    spec=$log/$(basename "$job" .yaml)-cuda.yaml
    # A few steps: 2 of RL; 10 of TST, whose schedule needs warmup < steps and a stable part.
    sed -e 's/^\(  model:\)$/\1\n    device: cuda/' -e 's/^\(    steps:\).*/\1 2/' \
      -e '/kind: TSTPretrainJob/,$ {s/^\(    steps:\).*/\1 10/; s/^\(      warmupSteps:\).*/\1 2/}' \
      "$job" >"$spec"
    for flag in "" --baseline; do
      name=$(basename "$spec" .yaml)${flag:+-baseline}
      if timeout 240 "$tlt" run "$spec" $flag >"$log/$name.log" 2>&1; then
        pass "jobs: $name ($(grep -m1 -o 'tlt_gpu_busy_ratio[^,]*' "$log/$name.log" || echo 'no ratio line'))"
      else
        fail "jobs: $name (see $log/$name.log)"
      fi
    done
  done
fi
((failed)) && { echo "gpu-run: FAIL (logs in $log)"; exit 1; }
echo "gpu-run: PASS (logs in $log)"
