#!/usr/bin/env bash
# gpu-check.sh: the one check of the GPU flavour (DESIGN.md section 6b). It builds tlt's LibTorch
# core against the machine's PyTorch (its CUDA LibTorch, with NCCL) and runs the runtime tests on
# the CUDA device. Every step prints one PASS/FAIL/SKIP line; the last line is the verdict.
#
#   1. torch     the Python with torch (TLT_PYTHON, else python3): torch, CUDA, NCCL versions and
#                the devices it sees.
#   2. toolkit   nvcc (TorchConfig enables CMake's CUDA language), found or assembled from the
#                nvidia-* wheels next to torch by scripts/gpu-toolkit.sh.
#   3. gtest     the system's GoogleTest, else built from the sources in .cache/googletest (made by
#                `--prepare` on a machine that has them, and carried to the device: run's
#                carry [".cache/googletest"]); without either the tests are not built (SKIP).
#   4. configure cmake -DTLT_GPU=ON -DTLT_CORE_ONLY=ON against torch.utils.cmake_prefix_path.
#   5. build     tlt_core and runtime_test (ninja, all cores).
#   6. cuda      runtime_test's Cuda.* and CudaGraphPool.* tests: transformer forward and the
#                rollout engine on CUDA against the CPU, NCCL collectives, CUDA graphs of the
#                verify forward and of the drafter's forwards (chain, tree, catch-up) against the
#                eager ones. Without a CUDA device: SKIP.
#   7. bench     bench_cuda_verify: verify forwards of a SmolLM2-135M-shaped target on the GPU,
#                eager vs CUDA-graph replay, and speculation's ceiling N x T(B,1)/T(B,N), in
#                float32 and bfloat16, then the engine end to end (plain eager and with graphs,
#                n-gram, EAGLE chain, adaptive); GPU_CHECK_BENCH=0 skips it, GPU_CHECK_BENCH_ARGS
#                replaces its flags (default --engine); the tables go to the log too.
#   8. suite     the rest of runtime_test on this LibTorch (CPU tests, OMP_NUM_THREADS=1 unless
#                set; bounded by GPU_CHECK_SUITE_TIMEOUT seconds, default 300; 0 skips it).
#
# Exit status: 0 all passed on a CUDA device; 1 something failed; 2 built and the CPU checks passed
# but there is no CUDA device (the CPU machines: everything up to the device is checked).
# Logs go to $OUT/gpu-check-logs when OUT is set (the device machine's run), else to /tmp.
# Environment: TLT_PYTHON, CUDA_HOME, GPU_CHECK_BUILD_DIR (default build-gpu),
# GPU_CHECK_CACHE (default ~/.cache/tlt; the assembled toolkit and gtest go there),
# GPU_CHECK_SUITE_TIMEOUT, GPU_CHECK_GTEST_SOURCE=1 (build gtest from .cache/googletest even when
# the system has one), GPU_CHECK_BUILD_ONLY=1 (stop after step 5; scripts/gpu-run.sh's first call),
# GPU_CHECK_JOBS (compile jobs, default all cores), GPU_CHECK_NICE (the build's niceness, default 0;
# on a shared machine without a GPU: GPU_CHECK_JOBS=1 GPU_CHECK_NICE=15), GPU_CHECK_PREBUILT=DIR
# (steps 2-5 skipped: DIR's runtime_test and bench_cuda_verify, built against this torch elsewhere,
# their libraries on LD_LIBRARY_PATH; scripts/gpu-run.sh with a bundle that carries them).
# Usage: scripts/gpu-check.sh            (on the device machine, from anywhere)
#        scripts/gpu-check.sh --prepare  (here: copy /usr/src/googletest into .cache/googletest)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
T0=$SECONDS
if [[ "${1:-}" == "--prepare" ]]; then
  src=/usr/src/googletest
  [[ -f $src/CMakeLists.txt ]] || { echo "FAIL: prepare: no $src (apt-get install googletest)"; exit 1; }
  rm -rf .cache/googletest && mkdir -p .cache && cp -r "$src" .cache/googletest
  echo "PASS: prepare: .cache/googletest ($(du -sh .cache/googletest | cut -f1)); carry it to the device"
  exit 0
fi

py=${TLT_PYTHON:-python3}
build=${GPU_CHECK_BUILD_DIR:-build-gpu}
cache=${GPU_CHECK_CACHE:-$HOME/.cache/tlt}
jobs=${GPU_CHECK_JOBS:-$(nproc)}
# Logs: under $OUT when set (the device machine's run returns that folder), else a temp dir.
if [[ -n ${OUT:-} ]]; then
  log=$OUT/gpu-check-logs && mkdir -p "$log"
else
  log=$(mktemp -d /tmp/tlt-gpu-check.XXXXXX)
fi
failed=0
pass() { echo "PASS: $1"; }
fail() { echo "FAIL: $1"; failed=1; }
skip() { echo "SKIP: $1"; }
finish() {
  local t=$((SECONDS - T0))
  if ((failed)); then
    echo "gpu-check: FAIL ($t s; logs in $log)"
    exit 1
  elif [[ "${1:-}" == nodevice ]]; then
    echo "gpu-check: INCOMPLETE: built and CPU-checked, but no CUDA device here ($t s)"
    exit 2
  fi
  echo "gpu-check: PASS ($t s)"
  exit 0
}

# ---- 1. torch ---------------------------------------------------------------------------------
if ! info=$("$py" - 2>"$log/torch.err" <<'EOF'
import os, torch
nccl = ".".join(map(str, torch.cuda.nccl.version())) if torch.version.cuda else "none"
devs = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] \
    if torch.cuda.is_available() else []
print(torch.__version__, torch.version.cuda or "none", nccl, len(devs),
      torch.utils.cmake_prefix_path, os.path.dirname(torch.__file__), sep="\n")
print("; ".join(devs) or "none")
EOF
)
then
  fail "torch: $py cannot import torch: $(tail -1 "$log/torch.err")"
  finish
fi
mapfile -t f <<<"$info"
torch_version=${f[0]} torch_cuda=${f[1]} nccl=${f[2]} n_dev=${f[3]}
torch_cmake=${f[4]} torch_dir=${f[5]} devices=${f[6]}
if [[ $torch_cuda == none ]]; then
  fail "torch: $torch_version is a CPU build (pip install torch: the default Linux wheel is CUDA)"
  finish
fi
pass "torch: $torch_version, CUDA $torch_cuda, NCCL $nccl; $n_dev device(s): $devices"

# ---- 2-5. toolkit, gtest, configure, build: here, or binaries built elsewhere ------------------
build_here() {
  # ---- 2. CUDA toolkit (nvcc) --------------------------------------------------------------------
  if ! toolkit=$(scripts/gpu-toolkit.sh "$torch_dir" "$torch_cuda" "$cache" 2>"$log/toolkit.err"); then
    fail "toolkit: $(cat "$log/toolkit.err")"
    finish
  fi
  nvcc_version=$("$toolkit/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
  [[ ${nvcc_version%%.*} == "${torch_cuda%%.*}" ]] ||
    echo "note: nvcc $nvcc_version and torch's CUDA $torch_cuda differ in the major version"
  pass "toolkit: nvcc $nvcc_version at $toolkit"

  # ---- 3. GoogleTest ---------------------------------------------------------------------------
  gtest_args=(-DTLT_TESTS=ON)
  system_gtest=""
  for f in /usr/lib/cmake/GTest/GTestConfig.cmake /usr/lib/*/cmake/GTest/GTestConfig.cmake \
    /usr/local/lib*/cmake/GTest/GTestConfig.cmake; do
    [[ -f $f ]] && system_gtest=$f
  done
  if [[ -z ${GPU_CHECK_GTEST_SOURCE:-} && -n $system_gtest ]]; then
    pass "gtest: the system's"
  elif [[ -f .cache/googletest/CMakeLists.txt ]]; then  # GPU_CHECK_GTEST_SOURCE=1 forces this
    gt=$cache/gtest-install
    if [[ ! -f $gt/lib/cmake/GTest/GTestConfig.cmake && ! -f $gt/lib64/cmake/GTest/GTestConfig.cmake ]]; then
      { cmake -S .cache/googletest -B "$cache/gtest-build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DBUILD_GMOCK=OFF -DCMAKE_INSTALL_PREFIX="$gt" && ninja -C "$cache/gtest-build" install; } \
        >"$log/gtest.log" 2>&1 || { fail "gtest: building .cache/googletest (see $log/gtest.log)"; finish; }
    fi
    gtest_args+=("-DGTest_ROOT=$gt")
    pass "gtest: built from .cache/googletest into $gt"
  else
    gtest_args=(-DTLT_TESTS=OFF)
    skip "gtest: none here and no .cache/googletest (scripts/gpu-check.sh --prepare, then carry it)"
  fi

  # ---- 4. configure ----------------------------------------------------------------------------
  if command -v ccache >/dev/null; then
    export CCACHE_DIR=${CCACHE_DIR:-$cache/ccache}
    export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
  fi
  # torch_dir as a prefix too: TorchConfig's find_library(c10) must find torch/lib before any
  # system LibTorch (see CMakeLists.txt).
  if ! PATH=$toolkit/bin:$PATH CUDACXX=$toolkit/bin/nvcc cmake -S . -B "$build" -G Ninja \
    -DTLT_GPU=ON -DTLT_CORE_ONLY=ON "${gtest_args[@]}" "-DCMAKE_PREFIX_PATH=$torch_cmake;$torch_dir" \
    -DCUDA_TOOLKIT_ROOT_DIR="$toolkit" -DCUDAToolkit_ROOT="$toolkit" >"$log/cmake.log" 2>&1; then
    grep -B2 -A8 "CMake Error" "$log/cmake.log" | head -40
    fail "configure: cmake -DTLT_GPU=ON -DTLT_CORE_ONLY=ON (see $log/cmake.log)"
    finish
  fi
  pass "configure: $build ($(grep -o 'NCCL: [^ ]*' "$log/cmake.log" | head -1))"

  # ---- 5. build --------------------------------------------------------------------------------
  targets=(tlt_core bench_cuda_verify)
  [[ ${gtest_args[0]} == -DTLT_TESTS=ON ]] && targets+=(runtime_test)
  t=$SECONDS
  if ! nice -n "${GPU_CHECK_NICE:-0}" ninja -C "$build" -j "$jobs" "${targets[@]}" >"$log/build.log" 2>&1; then
    grep -m 20 -A3 "error" "$log/build.log"
    fail "build: ${targets[*]} (see $log/build.log)"
    finish
  fi
  pass "build: ${targets[*]} in $((SECONDS - t)) s on $jobs cores"
}
bin=$build/bin
if [[ -n ${GPU_CHECK_PREBUILT:-} ]]; then
  bin=$GPU_CHECK_PREBUILT
  if [[ ! -x $bin/runtime_test || ! -x $bin/bench_cuda_verify ]]; then
    fail "prebuilt: no runtime_test and bench_cuda_verify in $bin (GPU_CHECK_PREBUILT)"
    finish
  fi
  pass "prebuilt: runtime_test and bench_cuda_verify of $bin (steps 2-5 skipped)"
else
  build_here
fi
if [[ -n ${GPU_CHECK_BUILD_ONLY:-} ]]; then  # scripts/gpu-run.sh receive: build, no device steps
  ((n_dev > 0)) && finish
  finish nodevice
fi
if [[ ! -x $bin/runtime_test ]]; then
  skip "cuda: no runtime_test (no gtest)"
  skip "suite: no runtime_test (no gtest)"
  ((n_dev > 0)) && finish
  finish nodevice
fi
if ! ldd "$bin/runtime_test" | grep -q libtorch_cuda; then
  fail "build: runtime_test does not link libtorch_cuda"
fi
ldd "$bin/runtime_test" | grep "not found" && fail "build: runtime_test misses libraries"

# ---- 6. the CUDA tests --------------------------------------------------------------------------
t=$SECONDS
"$bin/runtime_test" --gtest_filter='Cuda.*:CudaGraphPool.*' >"$log/cuda.log" 2>&1
rc=$?
grep -E "maxdiff|nccl:|\[  (FAILED|SKIPPED|PASSED)" "$log/cuda.log" | sed 's/^/  /'
if [[ $rc -ne 0 ]]; then
  grep -B5 -A15 "^\[  FAILED  \]" "$log/cuda.log" | head -80
  fail "cuda: runtime_test --gtest_filter=Cuda.*:CudaGraphPool.* (see $log/cuda.log)"
elif ((n_dev == 0)); then
  skip "cuda: no CUDA device (torch.cuda.is_available() is False); the CUDA tests skipped cleanly"
else
  pass "cuda: $(grep -c '^\[       OK \]' "$log/cuda.log") CUDA tests on $devices in $((SECONDS - t)) s"
fi

# ---- 7. the GPU bench --------------------------------------------------------------------------
if ((n_dev > 0)) && [[ ${GPU_CHECK_BENCH:-1} != 0 ]]; then
  t=$SECONDS
  if timeout 300 "$bin/bench_cuda_verify" ${GPU_CHECK_BENCH_ARGS:---engine} 2>&1 | tee "$log/bench.log"; then
    pass "bench: bench_cuda_verify in $((SECONDS - t)) s (table above, and $log/bench.log)"
  else
    fail "bench: bench_cuda_verify (see $log/bench.log)"
  fi
else
  skip "bench: no CUDA device, or GPU_CHECK_BENCH=0"
fi

# ---- 8. the rest of the suite on this LibTorch ---------------------------------------------------
limit=${GPU_CHECK_SUITE_TIMEOUT:-300}
if ((limit > 0)); then
  t=$SECONDS
  # One OpenMP thread unless told otherwise: the suite's models are tiny, and spinning OpenMP
  # teams on a busy machine make them crawl (seen here: 20x slower on 2 shared cores).
  OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} timeout "$limit" "$bin/runtime_test" \
    --gtest_filter='-Cuda.*:CudaGraphPool.*' >"$log/suite.log" 2>&1
  rc=$?
  grep -E "^\[  FAILED  \]|^\[  PASSED  \]|tests ran" "$log/suite.log" | sed 's/^/  /' | head -20
  if [[ $rc -eq 124 ]]; then
    fail "suite: runtime_test (CPU tests) did not finish in $limit s (see $log/suite.log)"
  elif [[ $rc -ne 0 ]]; then
    grep -B10 "^\[  FAILED  \]" "$log/suite.log" | head -60
    fail "suite: runtime_test (CPU tests) on torch $torch_version (see $log/suite.log)"
  else
    pass "suite: runtime_test (CPU tests) on torch $torch_version in $((SECONDS - t)) s"
  fi
else
  skip "suite: GPU_CHECK_SUITE_TIMEOUT=0"
fi
((n_dev > 0)) && finish
finish nodevice
