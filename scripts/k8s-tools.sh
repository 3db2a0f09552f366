#!/usr/bin/env bash
# Builds the Kubernetes binaries that the operator's integration tests run -- kube-apiserver,
# kubectl, kube-controller-manager, kube-scheduler, etcd, kwok and helm, and on request Kueue --
# from the Go module proxy only, and caches them outside the checkout. Idempotent: a second run
# builds nothing and only says where the binaries are.
#
# Usage: scripts/k8s-tools.sh                  # build what is missing, print the bin dir last
#        bin=$(scripts/k8s-tools.sh | tail -1)  # progress goes to stderr, the bin dir to stdout
#        scripts/k8s-tools.sh kueue            # the same, and Kueue's manager and manifests
#                                              # (only the Kueue tests need them: a long build)
#
# Cache:    ${TLT_CACHE:-$HOME/.cache/tlt}/k8s/<K8S_VERSION>/bin   (the binaries)
#           ${TLT_CACHE:-$HOME/.cache/tlt}/k8s/go/{mod,build}       (Go module and build caches)
#           .../bin/kueue-manifests  (Kueue's CRDs and webhook configurations, from its module zip)
# Versions: K8S_VERSION, ETCD_VERSION, KWOK_VERSION, HELM_VERSION, KUEUE_VERSION override the
#           pins below; a binary whose recorded version differs from its pin is rebuilt.
#
# kube-apiserver, kubectl, kube-controller-manager and kube-scheduler come from k8s.io/kubernetes,
# whose go.mod points its staging modules (k8s.io/api, k8s.io/client-go, ...) at directories
# inside its own repository. They are built in a throwaway wrapper module (in a temp dir) that
# requires k8s.io/kubernetes and replaces each staging module by its published v0.X.Y release;
# the list of staging modules is read from the .mod file that `go mod download -json` reports.
# etcd, kwok, helm and kueue are built the same way (a wrapper module each), so that their own
# replace directives cannot get in the way.
# Needs: go (1.26 or newer), coreutils, sed, awk. Reaches nothing but the Go module proxy (and
# the checksum database, as the go command does by default).
set -euo pipefail

# Pins. Kubernetes 1.36 is built with Go 1.26 and talks to etcd 3.6 (its go.mod pins the 3.6
# client), so etcd is the newest 3.6 patch release.
K8S_VERSION=${K8S_VERSION:-v1.36.3}
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
HELM_VERSION=${HELM_VERSION:-v3.21.4}
# Kueue 0.17 is built against Kubernetes 1.35's client libraries and serves its v1beta2 API
# (v1beta1 still served, converted by its webhook); it works with a 1.36 apiserver.
KUEUE_VERSION=${KUEUE_VERSION:-v0.17.0}

say() { printf 'k8s-tools: %s\n' "$*" >&2; }
die() { printf 'k8s-tools: error: %s\n' "$*" >&2; exit 1; }

WITH_KUEUE=false
for arg in "$@"; do
  case $arg in
    kueue) WITH_KUEUE=true ;;
    *) die "unknown argument '$arg'; the only optional tool is kueue" ;;
  esac
done
command -v go >/dev/null 2>&1 || die "go is not installed (Go 1.26 or newer is needed)"
[[ $K8S_VERSION =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || die "K8S_VERSION must look like v1.X.Y (got $K8S_VERSION)"
K8S_MINOR=${BASH_REMATCH[1]}
STAGING_VERSION="v0.${K8S_MINOR}.${BASH_REMATCH[2]}"   # k8s.io/api etc. for Kubernetes v1.X.Y

ROOT="${TLT_CACHE:-$HOME/.cache/tlt}/k8s"
BIN="$ROOT/$K8S_VERSION/bin"
mkdir -p "$BIN" "$ROOT/go"

# Go environment: caches under ROOT, module mode, static binaries, this machine's Go unless the
# caller chose a toolchain, and no go.work from wherever the script was started.
export GOMODCACHE="$ROOT/go/mod" GOCACHE="$ROOT/go/build"
export GOFLAGS=-mod=mod CGO_ENABLED=0 GOWORK=off GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
unset GOOS GOARCH

# One run at a time per cache (two runs would race on the same wrapper outputs and bin dir).
if command -v flock >/dev/null 2>&1; then
  exec 9>"$ROOT/.lock"
  if ! flock -n 9; then
    say "another k8s-tools.sh run holds $ROOT/.lock; waiting for it"
    flock 9
  fi
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/tlt-k8s-tools.XXXXXX")
STAGE=""   # half-built binaries of the build in progress, inside BIN
cleanup() {
  chmod -R u+w "$WORK" 2>/dev/null || true
  rm -rf "$WORK" ${STAGE:+"$STAGE"}
}
trap cleanup EXIT

# is_current NAME MODULE@VERSION: the cached binary exists and was built from MODULE@VERSION.
is_current() {
  [[ -x "$BIN/$1" && -f "$BIN/.$1.version" && "$(cat "$BIN/.$1.version")" == "$2" ]]
}

# show_log LOG: the go command's errors from LOG, indented, without its progress lines; the last
# 25 at most (a missing module makes it report every import of it).
show_log() {
  grep -v '^go: downloading ' "$1" | tail -n 25 | sed 's/^/    /' >&2 || true
}

# registry_fail LOG WHAT: stop, naming the module the go command could not fetch (taken from
# its error output in LOG), or WHAT when the output names none.
registry_fail() {
  local log=$1 what=$2 mod
  mod=$(grep -oE '[A-Za-z0-9._~/-]+@v[0-9][A-Za-z0-9.+-]*' "$log" | tail -1 || true)
  mod=${mod:-$what}
  show_log "$log"
  [[ $mod == "$what" ]] || mod+=" (needed for $what)"
  die "the Go module proxy did not deliver $mod; check the version, GOPROXY and the network, then run again"
}

# mod_file MODULE@VERSION: download the module and print the path of its cached .mod file.
mod_file() {
  local mv=$1 log="$WORK/download.log" json gomod
  if ! json=$(cd "$WORK" && go mod download -json "$mv" 2>"$log"); then
    printf '%b\n' "$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Error": "\(.*\)",*$/\1/p')" >>"$log"
    registry_fail "$log" "$mv"
  fi
  gomod=$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')
  [[ -f $gomod ]] || die "go mod download -json $mv reported no .mod file"
  printf '%s\n' "$gomod"
}

# release_date MODFILE: the module version's publication time, from the .info file beside it.
release_date() {
  sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "${1%.mod}.info" 2>/dev/null | head -1
}

# new_wrapper NAME MODFILE: make an empty wrapper module in a temp dir, with the same go line as
# the module it wraps; print its directory.
new_wrapper() {
  local dir="$WORK/$1" goline
  mkdir -p "$dir"
  goline=$(grep -m1 '^go [0-9]' "$2" || echo "go 1.26.0")
  printf 'module tlt.invalid/k8s-tools/%s\n\n%s\n' "$1" "$goline" >"$dir/go.mod"
  printf '%s\n' "$dir"
}

# build DIR WHAT LDFLAGS NAME PKG...: resolve (fetch) then compile PKGs in wrapper DIR into BIN,
# as NAME when one package is built and NAME is not empty, else under go's default names.
# Fetch and compile are separate steps so that a registry failure is reported as one.
build() {
  local dir=$1 what=$2 ldflags=$3 name=$4 start out f
  shift 4
  start=$SECONDS
  say "$what: fetching the modules it needs"
  if ! (cd "$dir" && go list -deps "$@" >/dev/null 2>"$WORK/list.log"); then
    if grep -qE 'reading |dial tcp|no such host|404|410|not found|unrecognized import|verifying |module lookup disabled' "$WORK/list.log"; then
      registry_fail "$WORK/list.log" "$what"
    fi
    show_log "$WORK/list.log"
    die "$what: go list failed (see above)"
  fi
  say "$what: compiling $* (this can take many minutes on a small machine)"
  STAGE=$(mktemp -d "$BIN/.stage.XXXXXX")
  out="$STAGE/$name"
  if ! (cd "$dir" && go build -trimpath -ldflags="-s -w $ldflags" -o "$out" "$@"); then
    die "$what: go build failed (see above)"
  fi
  for f in "$STAGE"/*; do mv -f "$f" "$BIN/"; done
  rmdir "$STAGE"
  STAGE=""
  say "$what: built in $((SECONDS - start)) s"
}

# stamp MODULE@VERSION NAME...: record what each binary was built from.
stamp() {
  local mv=$1 n
  shift
  for n in "$@"; do printf '%s\n' "$mv" >"$BIN/.$n.version"; done
}

say "cache: $BIN"

# k8s_wrapper NAME: a wrapper module (printed: its directory) that requires k8s.io/kubernetes and
# replaces each of its staging modules by the published release; sets K8S_VFLAGS to the -X flags
# that stamp in the version the binaries report, as the release build does (the module proxy
# does not say which git commit the version is, so gitCommit is left empty).
K8S_MV="k8s.io/kubernetes@$K8S_VERSION"
k8s_wrapper() {
  local modfile staging dir m pkg
  modfile=$(mod_file "$K8S_MV")
  # Lines like `k8s.io/api => ./staging/src/k8s.io/api`, inside a replace block or standalone.
  staging=$(awk '
    $1 == "replace" && $3 == "=>" && $4 ~ /^\.\/staging\// { print $2; next }
    $2 == "=>" && $3 ~ /^\.\/staging\// { print $1 }' "$modfile" | sort -u)
  [[ -n $staging ]] || die "found no staging modules in $modfile"
  say "$(wc -l <<<"$staging") staging modules of $K8S_MV -> $STAGING_VERSION"
  dir=$(new_wrapper "$1" "$modfile")
  {
    grep '^godebug [^(]' "$modfile" || true
    printf '\nrequire k8s.io/kubernetes %s\n\nreplace (\n' "$K8S_VERSION"
    while read -r m; do printf '\t%s => %s %s\n' "$m" "$m" "$STAGING_VERSION"; done <<<"$staging"
    printf ')\n'
  } >>"$dir/go.mod"
  K8S_VFLAGS=""
  for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    K8S_VFLAGS+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$K8S_MINOR"
    K8S_VFLAGS+=" -X $pkg.gitTreeState=archive -X $pkg.buildDate=$(release_date "$modfile") -X $pkg.gitCommit="
  done
  printf '%s\n' "$dir"
}

# --- kube-apiserver and kubectl: k8s.io/kubernetes with its staging modules replaced ---------
if is_current kube-apiserver "$K8S_MV" && is_current kubectl "$K8S_MV"; then
  say "kube-apiserver, kubectl $K8S_VERSION: cached"
else
  k8s_wrapper kubernetes >"$WORK/k8s-dir"
  dir=$(<"$WORK/k8s-dir")
  build "$dir" "kube-apiserver, kubectl $K8S_VERSION" "$K8S_VFLAGS" "" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl
  stamp "$K8S_MV" kube-apiserver kubectl
fi

# --- kube-controller-manager and kube-scheduler: the same module and version, built on their
# own so that an older cache (apiserver and kubectl only) gains them without rebuilding those.
# They share the Go build cache with the apiserver, so most of their packages are compiled
# already (measured on 2 busy cores: 157 s for the controller-manager after the apiserver, then
# 38 s for both, the scheduler added, with the controller-manager cached).
# The operator tests in which a Deployment must get running pods (operator.helm_upgrade) start
# both: the controller-manager makes the ReplicaSets and pods, the scheduler binds the pods to
# kwok's nodes.
if is_current kube-controller-manager "$K8S_MV" && is_current kube-scheduler "$K8S_MV"; then
  say "kube-controller-manager, kube-scheduler $K8S_VERSION: cached"
else
  k8s_wrapper kube-controllers >"$WORK/kcm-dir"
  dir=$(<"$WORK/kcm-dir")
  build "$dir" "kube-controller-manager, kube-scheduler $K8S_VERSION" "$K8S_VFLAGS" "" \
    k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler
  stamp "$K8S_MV" kube-controller-manager kube-scheduler
fi

# --- etcd: the server module's main package ---------------------------------------------------
ETCD_MV="go.etcd.io/etcd/server/v3@$ETCD_VERSION"
if is_current etcd "$ETCD_MV"; then
  say "etcd $ETCD_VERSION: cached"
else
  modfile=$(mod_file "$ETCD_MV")
  dir=$(new_wrapper etcd "$modfile")
  printf '\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" >>"$dir/go.mod"
  build "$dir" "etcd $ETCD_VERSION" "" etcd go.etcd.io/etcd/server/v3
  stamp "$ETCD_MV" etcd
fi

# --- kwok -----------------------------------------------------------------------------------------
KWOK_MV="sigs.k8s.io/kwok@$KWOK_VERSION"
if is_current kwok "$KWOK_MV"; then
  say "kwok $KWOK_VERSION: cached"
else
  modfile=$(mod_file "$KWOK_MV")
  dir=$(new_wrapper kwok "$modfile")
  printf '\nrequire sigs.k8s.io/kwok %s\n' "$KWOK_VERSION" >>"$dir/go.mod"
  build "$dir" "kwok $KWOK_VERSION" "-X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}" kwok \
    sigs.k8s.io/kwok/cmd/kwok
  stamp "$KWOK_MV" kwok
fi

# --- helm -----------------------------------------------------------------------------------------
HELM_MV="helm.sh/helm/v3@$HELM_VERSION"
if is_current helm "$HELM_MV"; then
  say "helm $HELM_VERSION: cached"
else
  modfile=$(mod_file "$HELM_MV")
  dir=$(new_wrapper helm "$modfile")
  printf '\nrequire helm.sh/helm/v3 %s\n' "$HELM_VERSION" >>"$dir/go.mod"
  # Helm's release build stamps its version and the Kubernetes version its client-go speaks
  # (client-go v0.N.x is Kubernetes 1.N); without them `helm version` and .Capabilities are off.
  cg=$(awk '$1 == "k8s.io/client-go" { print $2; exit }' "$modfile")
  [[ $cg =~ ^v0\.([0-9]+)\. ]] || die "cannot read the k8s.io/client-go version from $modfile"
  hflags="-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
  hflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
  for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
    hflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=${BASH_REMATCH[1]}"
  done
  build "$dir" "helm $HELM_VERSION" "$hflags" helm helm.sh/helm/v3/cmd/helm
  stamp "$HELM_MV" helm
fi

# --- kueue ---------------------------------------------------------------------------------------
# Kueue's manager (cmd/kueue) and, from the same module zip, the manifests that scripts/k8s-env.sh
# (k8s_kueue_start) installs: config/components/crd (the CRDs and the kustomize patches that say
# which of them convert through the webhook) and config/components/webhook (the webhook
# configurations and their patches), copied to $BIN/kueue-manifests/{crd,webhook}. The
# manager compiles every job integration Kueue ships (Kubeflow, Ray, JobSet, LWS, ...): a long
# build, hence only on request.
KUEUE_MV="sigs.k8s.io/kueue@$KUEUE_VERSION"
KUEUE_MANIFESTS="$BIN/kueue-manifests"
if ! $WITH_KUEUE; then
  :
elif is_current kueue "$KUEUE_MV" && [[ -f "$KUEUE_MANIFESTS/.version" &&
  "$(cat "$KUEUE_MANIFESTS/.version")" == "$KUEUE_MV" ]]; then
  say "kueue $KUEUE_VERSION: cached"
else
  modfile=$(mod_file "$KUEUE_MV")
  moddir=$(cd "$WORK" && go mod download -json "$KUEUE_MV" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
  [[ -d $moddir/config/components/crd/bases ]] ||
    die "$KUEUE_MV has no config/components/crd/bases (is $KUEUE_VERSION a Kueue release?)"
  rm -rf "$KUEUE_MANIFESTS"
  mkdir -p "$KUEUE_MANIFESTS"
  cp -r "$moddir/config/components/crd" "$moddir/config/components/webhook" "$KUEUE_MANIFESTS/"
  chmod -R u+w "$KUEUE_MANIFESTS"
  printf '%s\n' "$KUEUE_MV" >"$KUEUE_MANIFESTS/.version"
  if ! is_current kueue "$KUEUE_MV"; then
    dir=$(new_wrapper kueue "$modfile")
    printf '\nrequire sigs.k8s.io/kueue %s\n' "$KUEUE_VERSION" >>"$dir/go.mod"
    kflags="-X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION"
    kflags+=" -X sigs.k8s.io/kueue/pkg/version.BuildDate=$(release_date "$modfile")"
    kflags+=" -X sigs.k8s.io/kueue/pkg/version.GitCommit="
    build "$dir" "kueue $KUEUE_VERSION" "$kflags" kueue sigs.k8s.io/kueue/cmd/kueue
    stamp "$KUEUE_MV" kueue
  fi
fi

# --- summary ---------------------------------------------------------------------------------------
tools=(kube-apiserver kubectl kube-controller-manager kube-scheduler etcd kwok helm)
! $WITH_KUEUE || tools+=(kueue)
for n in "${tools[@]}"; do
  [[ -x "$BIN/$n" ]] || die "$BIN/$n is missing after the build"
  say "$(printf '%-23s %-40s %4d MiB' "$n" "$(cat "$BIN/.$n.version")" $(( $(stat -c %s "$BIN/$n") / 1048576 )))"
done
printf '%s\n' "$BIN"
