#!/usr/bin/env bash
# Runs a program of an image the way a pod with readOnlyRootFilesystem runs it: in a mount
# namespace of its own, chrooted into ROOTFS (a `buildah mount` of a working container) made
# read-only, as USER (uid:gid), with /proc, /dev, a read-only /sys, a tmpfs /tmp and /dev/shm,
# the host's /etc/hosts and /etc/resolv.conf, the given bind mounts, and only the given
# environment. The network is the host's. The program replaces this script's process (same
# PID: a TERM sent to it reaches the program). Needs root (mount namespaces, chroot).
# buildah run has no read-only root (no --read-only), hence this instead of it.
# Usage: run_in_image.sh ROOTFS USER [--bind SRC:DST[:ro]]... [--env K=V]... [--workdir DIR] -- CMD...
set -euo pipefail
die() { echo "run_in_image: $*" >&2; exit 125; }
if [[ -z ${TLT_RUN_IN_IMAGE_NS:-} ]]; then
  TLT_RUN_IN_IMAGE_NS=1 exec unshare --mount --propagation private "$0" "$@"
fi
[[ $# -ge 2 ]] || die "usage: run_in_image.sh ROOTFS USER [--bind SRC:DST[:ro]]... [--env K=V]... [--workdir DIR] -- CMD..."
root=$1 user=$2
shift 2
binds=() envs=() workdir=/
while [[ $# -gt 0 && $1 != -- ]]; do
  case $1 in
    --bind) binds+=("$2") ;;
    --env) envs+=("$2") ;;
    --workdir) workdir=$2 ;;
    *) die "unknown option $1" ;;
  esac
  shift 2
done
[[ ${1:-} == -- ]] || die "no -- before the command"
shift
[[ -d $root/usr ]] || die "$root is not an image's root file system"

mount_point() {  # SRC DST: DST (a directory or file as SRC is) under the root, where it can be made
  if [[ -d $1 ]]; then mkdir -p "$root$2"; else mkdir -p "$(dirname "$root$2")"; touch "$root$2"; fi
}
# Mount points are made while the root is still writable (in the working container, not the image).
mount --bind "$root" "$root"
for b in "${binds[@]}"; do
  IFS=: read -r src dst _ <<<"$b"
  mount_point "$src" "$dst"
done
for f in etc/hosts etc/resolv.conf; do [[ -e $root/$f ]] || touch "$root/$f"; done
mkdir -p "$root/proc" "$root/dev" "$root/sys" "$root/tmp"
mount -o remount,bind,ro "$root"

mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount -t tmpfs -o mode=1777,size=1g tmpfs "$root/dev/shm"
mount --rbind /sys "$root/sys"
mount -o remount,bind,ro "$root/sys"
mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
mount --bind /etc/hosts "$root/etc/hosts"
mount --bind /etc/resolv.conf "$root/etc/resolv.conf"
for b in "${binds[@]}"; do
  IFS=: read -r src dst mode <<<"$b"
  # (a mount point under /tmp is made again on the tmpfs that now covers the one made above)
  [[ -e $root$dst ]] || mount_point "$src" "$dst"
  mount --bind "$src" "$root$dst"
  [[ $mode != ro ]] || mount -o remount,bind,ro "$root$dst"
done
exec chroot --userspec="$user" "$root" /usr/bin/env -i -C "$workdir" "${envs[@]}" "$@"
