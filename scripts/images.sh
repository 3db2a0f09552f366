#!/usr/bin/env bash
# Builds the images users deploy, from docker/*.Dockerfile as a user would, with Debian's buildah
# (no daemon): tlt-operator:VERSION (docker/operator.Dockerfile) and tlt:VERSION
# (docker/runtime.Dockerfile), or with --cuda tlt:VERSION-cuda13.0 (docker/runtime-cuda.Dockerfile)
# in place of the CPU runtime. VERSION is the project version of CMakeLists.txt.
#
# The Debian bases (debian:bookworm, debian:bookworm-slim) come from buildah's storage when present
# there, else from a registry, else they are made from Debian's packages with mmdebstrap (minbase;
# the slim one without docs, man pages and locales, as Docker's -slim). The CUDA bases
# (nvidia/cuda) have no such stand-in: --cuda needs a registry that serves them.
#
# --prebuilt DIR takes tlt, tlt-data and tlt-operator from DIR (e.g. build/bin) instead of
# compiling them in the Dockerfile's build stage: they become the `binaries` stage (buildah's and
# `docker buildx build`'s --build-context binaries=DIR), the build stage is skipped, and the final
# stages are built exactly as without it. The binaries are stripped on the way in.
#
# Storage: buildah's, with the vfs driver, under $TLT_IMAGES_CACHE (default ~/.cache/tlt/images):
# storage/ holds the images (the bases stay between runs), oci/NAME-VERSION.tar and
# docker/NAME-VERSION.tar each image as an OCI and a Docker archive (see report below), logs/ the
# build logs. Other scripts reach the same storage with `scripts/images.sh --buildah ARGS...`.
# A failed step is named (the Dockerfile, its STEP line and the end of its log) and exits 1.
# Last lines: `image: REF` per image built.
# Usage: scripts/images.sh [--cuda] [--prebuilt DIR]
#        scripts/images.sh --buildah BUILDAH-ARGS...     # buildah on the same storage
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${TLT_IMAGES_CACHE:-$HOME/.cache/tlt/images}
BUILDAH=(buildah --root "$cache/storage" --runroot "$cache/run" --storage-driver vfs)
MIRROR=${TLT_DEBIAN_MIRROR:-http://deb.debian.org}
say() { printf 'images: %s\n' "$*"; }
die() { printf 'images: error: %s\n' "$*" >&2; exit 1; }

if [ "${1:-}" = --buildah ]; then
  shift
  exec "${BUILDAH[@]}" "$@"
fi

cuda=false prebuilt=
while [ $# -gt 0 ]; do
  case "$1" in
    --cuda) cuda=true; shift ;;
    --prebuilt) [ $# -ge 2 ] || die "--prebuilt needs a directory holding tlt, tlt-data and tlt-operator (e.g. build/bin)"
                prebuilt=$2; shift 2 ;;
    *) die "unknown argument '$1'; usage: scripts/images.sh [--cuda] [--prebuilt DIR]" ;;
  esac
done
# The CUDA image links its binaries against the torch wheel's LibTorch in its own build stage.
if $cuda && [ -n "$prebuilt" ]; then
  die "--prebuilt takes binaries built against Debian's CPU LibTorch; the CUDA runtime image builds its own: use one of --cuda and --prebuilt"
fi
command -v buildah >/dev/null 2>&1 ||
  die "buildah is not installed (Debian: apt-get install buildah crun; or scripts/setup.sh)"
version=$(sed -n 's/^project(tlt VERSION \([0-9.]*\).*/\1/p' "$repo/CMakeLists.txt")
[ -n "$version" ] || die "no 'project(tlt VERSION x.y.z' line in $repo/CMakeLists.txt"
mkdir -p "$cache/oci" "$cache/docker" "$cache/logs" "$cache/run" || die "cannot create $cache"

have_image() { "${BUILDAH[@]}" inspect --type image "$1" >/dev/null 2>&1; }

# make_debian_base REF SLIM: REF from Debian's bookworm packages, rooted at / with bash as CMD.
make_debian_base() {
  local ref=$1 slim=$2 tar="$cache/base.tar" log="$cache/logs/mmdebstrap.log" ctr
  command -v mmdebstrap >/dev/null 2>&1 ||
    die "$ref is not in buildah's storage, no registry served it, and mmdebstrap is not installed to make it (Debian: apt-get install mmdebstrap)"
  # As in Docker's Debian images, apt keeps no downloaded packages or binary caches, so a
  # Dockerfile's `apt-get install ... && rm -rf /var/lib/apt/lists/*` leaves no package cache.
  # (The slim base's --dpkgopt path filters stay in /etc/dpkg/dpkg.cfg.d for later installs.)
  cat >"$cache/apt-clean.conf" <<'EOF_APT'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
Acquire::Languages "none";
EOF_APT
  # merged-usr: /usr merged as in Docker's images, with usr-is-merged rather than usrmerge (which
  # would bring perl, about 50 MB, into every image).
  local opts=(--variant=minbase --format=tar --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr
              --customize-hook="upload $cache/apt-clean.conf /etc/apt/apt.conf.d/docker-clean"
              --customize-hook='rm -f "$1"/var/cache/apt/*.bin')
  $slim && opts+=(--dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright'
                  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*'
                  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias')
  say "making $ref from Debian's bookworm packages with mmdebstrap (log: $log)"
  nice mmdebstrap "${opts[@]}" bookworm "$tar" \
      "deb $MIRROR/debian bookworm main" "deb $MIRROR/debian bookworm-updates main" \
      "deb $MIRROR/debian-security bookworm-security main" >"$log" 2>&1 ||
    { tail -5 "$log" >&2; rm -f "$tar"; die "mmdebstrap could not make $ref (log: $log)"; }
  ctr=$("${BUILDAH[@]}" from scratch) || die "buildah from scratch failed"
  "${BUILDAH[@]}" add "$ctr" "$tar" / >>"$log" 2>&1 &&
    "${BUILDAH[@]}" config --cmd bash --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      --os linux --arch "$(dpkg --print-architecture)" "$ctr" &&
    "${BUILDAH[@]}" commit -q --rm "$ctr" "$ref" >>"$log" 2>&1 ||
    { rm -f "$tar"; die "could not store $ref in buildah's storage (log: $log)"; }
  rm -f "$tar"
}

# ensure_base REF: REF in buildah's storage (pulled or made), so builds never wait on a registry.
ensure_base() {
  local ref=$1
  have_image "$ref" && return 0
  if "${BUILDAH[@]}" pull -q "$ref" >"$cache/logs/pull.log" 2>&1; then
    say "pulled $ref"; return 0
  fi
  case "$ref" in
    docker.io/library/debian:bookworm) make_debian_base "$ref" false ;;
    docker.io/library/debian:bookworm-slim) make_debian_base "$ref" true ;;
    *) die "the base image $ref is not in buildah's storage and no registry served it ($(tail -1 "$cache/logs/pull.log")); pull it where a registry can be reached and load it with: scripts/images.sh --buildah pull oci-archive:FILE" ;;
  esac
}

# The prebuilt binaries, stripped, in a context of their own (the Dockerfiles' `binaries` stage).
bin_ctx=
if [ -n "$prebuilt" ]; then
  bin_ctx="$cache/binaries"
  rm -rf "$bin_ctx" && mkdir -p "$bin_ctx" || die "cannot create $bin_ctx"
  for b in tlt tlt-data tlt-operator; do
    [ -x "$prebuilt/$b" ] || die "--prebuilt $prebuilt has no executable $b (build it: scripts/build.sh, or ninja -C build $b)"
    strip --strip-unneeded -o "$bin_ctx/$b" "$prebuilt/$b" || die "strip $prebuilt/$b failed"
  done
fi

# build_image REF DOCKERFILE: builds REF from docker/DOCKERFILE with the repository as context.
build_image() {
  local ref=$1 file=$2 log="$cache/logs/$2.log" t0=$SECONDS args step
  args=(bud --isolation chroot --layers --format oci -f "docker/$file"
        --ignorefile "docker/$file.dockerignore" -t "$ref")
  [ -n "$bin_ctx" ] && args+=(--build-context "binaries=$bin_ctx")
  say "building $ref from docker/$file${bin_ctx:+ with the binaries of $prebuilt} (log: $log)"
  if ! (cd "$repo" && nice "${BUILDAH[@]}" "${args[@]}" .) >"$log" 2>&1; then
    step=$(grep -E '^(\[[0-9]+/[0-9]+\] )?STEP [0-9]+/[0-9]+: ' "$log" | tail -1)
    echo "----- the end of $log -----" >&2
    tail -15 "$log" >&2
    die "building $ref from docker/$file failed at ${step:-its start (no STEP ran)}"
  fi
  say "built $ref in $((SECONDS - t0)) s"
}

# report REF: prints the image's size and digest and writes its archives: an OCI archive
# (oci/NAME-VERSION.tar: `skopeo copy oci-archive:F docker://REGISTRY/NAME:VERSION`,
# `ctr images import --base-name`) and a Docker archive (docker/NAME-VERSION.tar: `kind load
# image-archive`, `docker load`), both naming the image docker.io/library/NAME:VERSION, the
# reference a pod's `NAME:VERSION` (the Helm chart's default repositories) resolves to.
report() {
  local ref=$1 name oci dock size digest
  name=${ref##*/}
  oci="$cache/oci/${name/:/-}.tar" dock="$cache/docker/${name/:/-}.tar"
  rm -f "$oci" "$dock"
  "${BUILDAH[@]}" push -q "$ref" "oci-archive:$oci:docker.io/library/$name" >"$cache/logs/push.log" 2>&1 &&
    "${BUILDAH[@]}" push -q "$ref" "docker-archive:$dock:docker.io/library/$name" >>"$cache/logs/push.log" 2>&1 ||
    { tail -5 "$cache/logs/push.log" >&2; die "could not write the archives of $ref (log: $cache/logs/push.log)"; }
  size=$("${BUILDAH[@]}" images --format '{{.Size}}' "$ref" | head -1)
  digest=$("${BUILDAH[@]}" images --digests --format '{{.Digest}}' "$ref" | head -1)
  printf 'images: %s: size %s, digest %s\n' "$ref" "$size" "$digest"
  printf 'images: %s: archives %s (OCI, %s MB), %s (Docker, %s MB)\n' "$ref" \
    "$oci" "$(($(stat -c %s "$oci") / 1000000))" "$dock" "$(($(stat -c %s "$dock") / 1000000))"
}

t_all=$SECONDS
refs=("localhost/tlt-operator:$version")
files=(operator.Dockerfile)
if $cuda; then
  refs+=("localhost/tlt:$version-cuda13.0"); files+=(runtime-cuda.Dockerfile)
else
  refs+=("localhost/tlt:$version"); files+=(runtime.Dockerfile)
fi
for file in "${files[@]}"; do
  for base in $(awk 'toupper($1) == "FROM" {print $2}' "$repo/docker/$file"); do
    case "$base" in
      scratch|build|binaries) ;;
      */*/*) ensure_base "$base" ;;
      */*) ensure_base "docker.io/$base" ;;
      *) ensure_base "docker.io/library/$base" ;;
    esac
  done
done
for i in "${!refs[@]}"; do
  build_image "${refs[$i]}" "${files[$i]}"
done
# vfs keeps a full copy of the file system per layer: images no tag or later build step refers to
# (an earlier build's) go, so the storage stays at about one build's size; the bases and the
# cached package layers stay.
"${BUILDAH[@]}" rmi --prune >/dev/null 2>&1 || say "note: could not prune unused images (scripts/images.sh --buildah rmi --prune)"
for ref in "${refs[@]}"; do report "$ref"; done
say "done in $((SECONDS - t_all)) s"
for ref in "${refs[@]}"; do echo "image: $ref"; done
