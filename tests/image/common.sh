# shellcheck shell=bash
# What the image tests share, to be sourced: the images scripts/images.sh built (its buildah
# storage), a working container's root file system per image, and the image's own run settings
# (user, environment, working directory) for tests/image/run_in_image.sh.
#   source "$src/tests/image/common.sh"; image_begin NAME   # sets IMG_WORK, IMG_VERSION
#   rootfs=$(image_rootfs tlt)                              # `buildah mount` of tlt:VERSION
#   image_run_args tlt; tests/image/run_in_image.sh "$rootfs" "${IMG_RUN_ARGS[@]}" -- tlt version
# Working containers are removed on exit (image_cleanup); IMG_STEP names what is being done.

IMG_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
IMG_VERSION=$(sed -n 's/^project(tlt VERSION \([0-9.]*\).*/\1/p' "$IMG_SRC/CMakeLists.txt")
IMG_CONTAINERS=()
IMG_STEP=setup

img_buildah() { "$IMG_SRC/scripts/images.sh" --buildah "$@"; }

# image_ref NAME: the reference scripts/images.sh gives image NAME (tlt, tlt-operator).
image_ref() { echo "localhost/$1:$IMG_VERSION"; }

# image_begin NAME: a work directory (removed on exit) and the checks every image test needs.
image_begin() {
  IMG_NAME=$1
  IMG_T0=$SECONDS
  [[ $(id -u) -eq 0 ]] || { echo "FAIL: $IMG_NAME: needs root (buildah's vfs storage, mount namespaces, chroot)"; exit 1; }
  command -v buildah >/dev/null 2>&1 ||
    { echo "FAIL: $IMG_NAME: buildah is not installed (scripts/setup.sh installs it)"; exit 1; }
  IMG_WORK=$(mktemp -d)
  chmod 755 "$IMG_WORK"
}

image_cleanup() {
  local c
  for c in "${IMG_CONTAINERS[@]}"; do
    img_buildah umount "$c" >/dev/null 2>&1 || true
    img_buildah rm "$c" >/dev/null 2>&1 || true
  done
  [[ -z ${IMG_WORK:-} ]] || rm -rf "$IMG_WORK"
}

# image_fail MESSAGE: the FAIL line naming the step, then exit 1.
image_fail() {
  echo "FAIL: $IMG_NAME: $IMG_STEP: $1"
  exit 1
}

# image_rootfs NAME: a working container of image NAME, mounted; prints its root directory.
# Its ID lands in IMG_CONTAINERS (removed by image_cleanup) via the file IMG_WORK/containers.
image_rootfs() {
  local ref c
  ref=$(image_ref "$1")
  img_buildah inspect --type image "$ref" >/dev/null 2>&1 ||
    { echo "no image $ref in scripts/images.sh's storage: run scripts/images.sh first" >&2; return 1; }
  c=$(img_buildah from --pull-never "$ref") || return 1
  echo "$c" >>"$IMG_WORK/containers"
  img_buildah mount "$c"
}

# image_track: IMG_CONTAINERS from the containers image_rootfs made in command substitutions.
image_track() {
  [[ -f $IMG_WORK/containers ]] && mapfile -t IMG_CONTAINERS <"$IMG_WORK/containers"
  return 0
}

# image_config NAME GO-TEMPLATE: a field of image NAME's OCI configuration.
image_config() { img_buildah inspect --type image --format "$2" "$(image_ref "$1")"; }

# image_run_args NAME: IMG_RUN_ARGS, the arguments of tests/image/run_in_image.sh after ROOTFS
# that run as image NAME's USER with its ENV and WORKDIR (a container runtime's defaults).
image_run_args() {
  local user workdir e
  user=$(image_config "$1" '{{.OCIv1.Config.User}}')
  workdir=$(image_config "$1" '{{.OCIv1.Config.WorkingDir}}')
  [[ -n $user ]] || user=0:0
  [[ $user == *:* ]] || user="$user:$user"
  IMG_RUN_ARGS=("$user" --workdir "${workdir:-/}")
  while IFS= read -r e; do [[ -z $e ]] || IMG_RUN_ARGS+=(--env "$e"); done \
    < <(image_config "$1" '{{range .OCIv1.Config.Env}}{{println .}}{{end}}')
}
