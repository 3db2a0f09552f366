#!/usr/bin/env bash
# gpu-bundle.sh: a GPU-flavour `tlt` for the device machine (docs/gpu.md, "The device run"). The
# device has the CUDA LibTorch (PyTorch's) but no yaml-cpp, cpprestsdk, prometheus-cpp or Rust
# toolchain, so it builds the core only; the full binaries are built here and carried.
#
#   0. torch      the CUDA torch of TLT_PYTHON; without it, the default ~/.cache/tlt/venv-cuda is
#                 made by scripts/gpu-venv.sh (pip's torch with the device's CUDA, nvcc, NCCL;
#                 about 4 GB of wheels), and the toolkit root by scripts/gpu-toolkit.sh.
#   1. configure  cmake -DTLT_GPU=ON -DTLT_TESTS=OFF against that torch, in GPU_BUNDLE_BUILD_DIR
#                 (default build-gpu-full/, ignored by git).
#   2. build      tlt, bench_rollout and tlt-data with GPU_BUNDLE_JOBS jobs (default 1), under
#                 nice -n GPU_BUNDLE_NICE (default 15).
#   3. assemble   DIR/bin: the three binaries, stripped, RPATH $ORIGIN/../lib (patchelf);
#                 DIR/tests: runtime_test and bench_cuda_verify of the GPU core's build folder
#                 (GPU_BUNDLE_TESTS_BUILD_DIR, default build-gpu from scripts/gpu-check.sh),
#                 brought up to date, so that the device runs the CUDA tests without building;
#                 DIR/lib: every shared library they need that is neither torch's, a CUDA/NVIDIA
#                 wheel's nor the C runtime's (glibc, libstdc++, libgcc_s), found with ldd;
#                 DIR/tlt-env: sourced by the device run, it puts DIR/lib and the device torch's
#                 lib folder (python3 -c 'import torch') on LD_LIBRARY_PATH, and DIR/compat
#                 (the libstdc++ built against) where the device's libstdc++ is older;
#                 DIR/cache: the tokenized corpus and tokenizer of examples/tst-tiny.yaml
#                 (GPU_BUNDLE_CORPUS, default sotu-bpe4096-h0.05; tokenized here by the built
#                 tlt-data when the cache lacks it), for the device's ~/.cache/tlt;
#                 DIR/MANIFEST: the commit, torch and the newest glibc version needed.
#   4. pack       DIR.tar.gz and its size; the device run carries it as its own part
#                 (scripts/gpu-carry.sh with GPU_CARRY_BUNDLE=DIR.tar.gz).
# Exit status: 0 packed; 1 a step failed (its FAIL line says which and where its log is).
# Usage: scripts/gpu-bundle.sh [DIR]   (default .cache/gpu-bundle; its parent is ignored by git)
# Environment: TLT_PYTHON, CUDA_HOME, GPU_BUNDLE_BUILD_DIR, GPU_BUNDLE_JOBS, GPU_BUNDLE_NICE,
# GPU_BUNDLE_CORPUS, GPU_CHECK_CACHE (default ~/.cache/tlt: the venv, ccache and the toolkit).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
dir=${1:-.cache/gpu-bundle}
cache=${GPU_CHECK_CACHE:-$HOME/.cache/tlt}
py=${TLT_PYTHON:-$cache/venv-cuda/bin/python3}
build=${GPU_BUNDLE_BUILD_DIR:-build-gpu-full}
jobs=${GPU_BUNDLE_JOBS:-1}
nice_n=${GPU_BUNDLE_NICE:-15}
targets=(tlt bench_rollout tlt-data)
fail() { echo "FAIL: $*"; exit 1; }
pass() { echo "PASS: $*"; }

# ---- 0. torch and the toolkit ------------------------------------------------------------------
if [[ -z ${TLT_PYTHON:-} ]]; then
  scripts/gpu-venv.sh "$cache/venv-cuda" || fail "torch: scripts/gpu-venv.sh $cache/venv-cuda"
fi
mapfile -t f < <("$py" -W ignore -c 'import os, torch
print(torch.__version__, torch.version.cuda or "none", torch.utils.cmake_prefix_path,
      os.path.dirname(torch.__file__), sep="\n")') || fail "torch: $py cannot import torch"
torch_version=${f[0]} torch_cuda=${f[1]} torch_cmake=${f[2]} torch_dir=${f[3]}
[[ $torch_cuda != none ]] || fail "torch: $torch_version is a CPU build"
toolkit=$(scripts/gpu-toolkit.sh "$torch_dir" "$torch_cuda" "$cache") || fail "toolkit (above)"

# ---- 1. configure ------------------------------------------------------------------------------
export CCACHE_DIR=${CCACHE_DIR:-$cache/ccache}
export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(pwd)} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}
mkdir -p "$build"
if ! PATH=$toolkit/bin:$PATH CUDACXX=$toolkit/bin/nvcc cmake -S . -B "$build" -G Ninja \
  -DTLT_GPU=ON -DTLT_TESTS=OFF \
  "-DCMAKE_PREFIX_PATH=$torch_cmake;$torch_dir" -DCUDA_TOOLKIT_ROOT_DIR="$toolkit" \
  -DCUDAToolkit_ROOT="$toolkit" >"$build/bundle-cmake.log" 2>&1; then
  grep -B2 -A8 "CMake Error" "$build/bundle-cmake.log" | head -40
  fail "configure: $build (see $build/bundle-cmake.log)"
fi
pass "configure: $build against torch $torch_version (CUDA $torch_cuda), nvcc in $toolkit"

# ---- 2. build ----------------------------------------------------------------------------------
t=$SECONDS
nice -n "$nice_n" ninja -C "$build" -j "$jobs" "${targets[@]}" || fail "build: ${targets[*]}"
pass "build: ${targets[*]} in $((SECONDS - t)) s with $jobs job(s)"

# ---- 3. assemble -------------------------------------------------------------------------------
command -v patchelf >/dev/null || fail "assemble: no patchelf (apt-get install -y patchelf)"
rm -rf "$dir" && mkdir -p "$dir/bin" "$dir/lib" || fail "assemble: cannot make $dir"
# A library travels unless the device's torch or its CUDA wheels provide it, or the C runtime does.
# realpath: the build links libcudart through gpu-check.sh's toolkit, links into the wheels.
provided() {
  local real
  real=$(realpath "$1")
  [[ $real == "$torch_dir"/* || $real == "$(dirname "$torch_dir")"/nvidia/* ]] && return 0
  case $(basename "$1") in
    libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | ld-linux* | libstdc++.so* | \
      libgcc_s.so* | libutil.so* | libresolv.so*) return 0 ;;
  esac
  return 1
}
# place BINARY FOLDER: BINARY stripped into DIR/FOLDER with RPATH $ORIGIN/../lib, and the
# libraries it needs that the device lacks into DIR/lib.
place() {
  local b=$1 to=$dir/$2 lib
  cp "$b" "$to/" && strip "$to/$(basename "$b")" || fail "assemble: $b"
  # LD_LIBRARY_PATH lets ldd resolve torch's libraries as the device will.
  while read -r lib; do
    provided "$lib" || [[ -f $dir/lib/$(basename "$lib") ]] || cp -L "$lib" "$dir/lib/"
  done < <(LD_LIBRARY_PATH=$torch_dir/lib ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// {print $3}')
  LD_LIBRARY_PATH=$torch_dir/lib ldd "$b" | grep "not found" && fail "assemble: $b misses libraries"
  patchelf --set-rpath '$ORIGIN/../lib' "$to/$(basename "$b")" || fail "assemble: patchelf $b"
}
for b in "${targets[@]}"; do place "$build/bin/$b" bin; done
# The device's CUDA tests, prebuilt (scripts/gpu-check.sh's GPU_CHECK_PREBUILT): the device then
# spends no minutes compiling. Built (or found up to date) in gpu-check.sh's build folder.
tests=${GPU_BUNDLE_TESTS_BUILD_DIR:-build-gpu}
if [[ -f $tests/build.ninja ]]; then
  t=$SECONDS
  nice -n "$nice_n" ninja -C "$tests" -j "$jobs" runtime_test bench_cuda_verify >"$build/bundle-tests.log" 2>&1 ||
    fail "build: runtime_test bench_cuda_verify in $tests (see $build/bundle-tests.log)"
  mkdir -p "$dir/tests"
  place "$tests/bin/runtime_test" tests && place "$tests/bin/bench_cuda_verify" tests
  pass "tests: runtime_test and bench_cuda_verify of $tests in $dir/tests ($((SECONDS - t)) s)"
else
  echo "SKIP: tests: $tests is not configured (TLT_PYTHON=$py GPU_CHECK_BUILD_ONLY=1" \
    "scripts/gpu-check.sh makes it); the device builds them"
fi
# The C++ runtime built against, used only where the device's is older (tlt-env decides).
mkdir -p "$dir/compat"
for lib in $(ldd "$build/bin/tlt" | awk '$1 ~ /^lib(stdc\+\+|gcc_s)\.so/ {print $3}'); do
  cp -L "$lib" "$dir/compat/" || fail "assemble: $lib"
done
for lib in "$dir"/lib/*; do
  strip --strip-unneeded "$lib" && patchelf --set-rpath '$ORIGIN' "$lib" || fail "assemble: $lib"
done
cat >"$dir/tlt-env" <<'EOF'
# Sourced before running the bundle's binaries: its own libraries, then the device torch's
# (libtorch*.so, libc10*.so) and its NVIDIA wheels' (CUDA runtime, NCCL...).
bundle_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# The NVIDIA wheels' lib folders too: the binaries need libcudart directly, before libtorch_cuda's
# own RPATH has loaded it.
torch_libs=$(${TLT_PYTHON:-python3} -W ignore -c 'import glob, os, torch
site = os.path.dirname(os.path.dirname(torch.__file__))
print(":".join([os.path.join(site, "torch", "lib")] + sorted(glob.glob(os.path.join(site, "nvidia", "*", "lib")))))')
export LD_LIBRARY_PATH=$bundle_dir/lib:$torch_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# The system's libstdc++ unless it lacks a version the binaries need; then the bundle's.
if "$bundle_dir/bin/tlt" --help 2>&1 >/dev/null | grep -q "GLIBCXX\|CXXABI"; then
  export LD_LIBRARY_PATH=$bundle_dir/compat:$LD_LIBRARY_PATH
fi
EOF
# The TST job's tokenized corpus and tokenizer: the device cannot fetch the corpus to tokenize it.
# Its name is runtime/tst/job_corpus.cc's key: <corpus>-bpe<vocab>-h<held-out fraction>.
corpus=${GPU_BUNDLE_CORPUS:-sotu-bpe4096-h0.05}
if [[ ! -f $cache/corpora/$corpus.tokens ]]; then
  [[ $corpus =~ ^([a-z0-9]+)-bpe([0-9]+)-h([0-9.]+)$ ]] ||
    fail "assemble: GPU_BUNDLE_CORPUS=$corpus is not <corpus>-bpe<vocab>-h<fraction>"
  mkdir -p "$cache/corpora" "$cache/tokenizers"
  TLT_CACHE=$cache "$build/bin/tlt-data" tokenize --corpus "${BASH_REMATCH[1]}" \
    --vocab "${BASH_REMATCH[2]}" --held-out "${BASH_REMATCH[3]}" \
    --tokenizer "$cache/tokenizers/$corpus.model" --out "$cache/corpora/$corpus.tokens" \
    >"$build/bundle-tokenize.log" 2>&1 || fail "assemble: tokenizing $corpus (see $build/bundle-tokenize.log)"
fi
mkdir -p "$dir/cache/corpora" "$dir/cache/tokenizers"
cp "$cache/corpora/$corpus.tokens" "$dir/cache/corpora/" &&
  cp "$cache/tokenizers/$corpus.model" "$dir/cache/tokenizers/" ||
  fail "assemble: no tokenized corpus $corpus in $cache"
glibc=$(objdump -T "$dir"/bin/* "$dir"/lib/* $(ls "$dir"/tests/* 2>/dev/null) 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
cat >"$dir/MANIFEST" <<EOF
tlt GPU bundle: commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo '+changes'), torch $torch_version, CUDA $torch_cuda, needs $glibc
$(cd "$dir" && ls bin lib $(ls -d tests 2>/dev/null) | tr '\n' ' ')
EOF
pass "assemble: $dir ($(du -sh "$dir" | cut -f1); $(ls "$dir/lib" | wc -l) libraries: $(ls "$dir/lib" | tr '\n' ' '))"

# ---- 4. pack -----------------------------------------------------------------------------------
tar -C "$(dirname "$dir")" -czf "$dir.tar.gz" "$(basename "$dir")" || fail "pack: $dir.tar.gz"
pass "pack: $dir.tar.gz ($(($(stat -c %s "$dir.tar.gz") / 1048576)) MiB," \
  "$(stat -c %s "$dir.tar.gz") bytes); carry it with GPU_CARRY_BUNDLE=$dir.tar.gz scripts/gpu-carry.sh"
