#!/usr/bin/env bash
# The images users deploy, built as scripts/images.sh builds them (buildah, from
# docker/operator.Dockerfile and docker/runtime.Dockerfile) with this build's binaries
# (--prebuilt: the Dockerfiles' `binaries` stage; the Debian bases stay cached in
# ~/.cache/tlt/images). Asserts: both build (a failing Dockerfile step is named: the STEP line
# and the end of its log), `image: REF` last lines, an OCI archive each, and final stages that
# hold no compiler, no package lists or caches, and only stripped binaries.
# The fixture of tests/image/runtime.sh and operator.sh. Last line: PASS or FAIL.
# Usage: build.sh SOURCE_DIR BIN_DIR
set -uo pipefail
src=$(cd "$1" && pwd)
bin=$(cd "$2" && pwd)
source "$src/tests/image/common.sh"
image_begin image.build
trap 'image_track; image_cleanup' EXIT

IMG_STEP="scripts/images.sh --prebuilt $bin"
out=$(nice "$src/scripts/images.sh" --prebuilt "$bin" 2>&1)
rc=$?
echo "$out"
[[ $rc -eq 0 ]] || image_fail "exited $rc: $(grep 'images: error:' <<<"$out" | tail -1)"
refs=$(grep '^image: ' <<<"$out" | sed 's/^image: //' | paste -sd' ')
want="$(image_ref tlt-operator) $(image_ref tlt)"
[[ $refs == "$want" ]] || image_fail "its image: lines name [$refs], want [$want]"
cache=${TLT_IMAGES_CACHE:-$HOME/.cache/tlt/images}
for name in tlt-operator tlt; do
  IMG_STEP="the archives of $name"
  tar -xOf "$cache/oci/$name-$IMG_VERSION.tar" index.json 2>/dev/null |
    grep -q "\"org.opencontainers.image.ref.name\":\"docker.io/library/$name:$IMG_VERSION\"" ||
    image_fail "no OCI archive naming docker.io/library/$name:$IMG_VERSION at $cache/oci/$name-$IMG_VERSION.tar"
  tar -xOf "$cache/docker/$name-$IMG_VERSION.tar" manifest.json 2>/dev/null |
    grep -q "\"docker.io/library/$name:$IMG_VERSION\"" ||
    image_fail "no Docker archive tagged docker.io/library/$name:$IMG_VERSION at $cache/docker/$name-$IMG_VERSION.tar"
done

# What the final stages hold: the binaries, their shared libraries and nothing to build with.
for name in tlt-operator tlt; do
  IMG_STEP="the final stage of $name"
  root=$(image_rootfs "$name") || image_fail "no working container of $(image_ref "$name")"
  image_track
  for tool in gcc g++ cc c++ cmake ninja make cargo rustc; do
    [[ ! -e $root/usr/bin/$tool ]] || image_fail "holds /usr/bin/$tool (a build tool)"
  done
  lists=$(find "$root/var/lib/apt/lists" -type f ! -name lock 2>/dev/null | head -3)
  [[ -z $lists ]] || image_fail "holds apt package lists: $lists"
  debs=$(find "$root/var/cache/apt" -name '*.deb' -o -name '*.bin' 2>/dev/null | head -3)
  [[ -z $debs ]] || image_fail "holds apt caches: $debs"
  for b in "$root"/usr/local/bin/*; do
    readelf -S "$b" | grep -q '\.symtab' && image_fail "$(basename "$b") is not stripped"
  done
  size=$(img_buildah images --format '{{.Size}}' "$(image_ref "$name")" | head -1)
  echo "image.build: $name: $size; /usr/local/bin: $(ls "$root/usr/local/bin" | paste -sd' ')"
done
echo "PASS: image.build: tlt-operator and tlt built from docker/ with $bin, final stages without build tools or apt caches ($((SECONDS - IMG_T0)) s)"
