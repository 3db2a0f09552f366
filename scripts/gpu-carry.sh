#!/usr/bin/env bash
# gpu-carry.sh: packs what the device run needs beyond the source tree into parts a device call
# can carry (at most 64 MiB a call, the tree included), under the ignored folder .cache/gpu-carry/:
#   model.gguf     the target (default ~/.cache/tlt/models/SmolLM2-135M-Instruct.Q4_1.gguf)
#   drafter.ckpt   a drafter trained on the target's own generations (default: the newest
#                  ~/.cache/tlt/drafter/generations-*.ckpt; GPU_CARRY_DRAFTER=none carries none,
#                  and the device run's bench trains its drafter first, inside its step's time)
# as one tar, cut into part-1, part-2... of at most GPU_CARRY_PART_MIB (default 60) MiB, and
#   bundle.tar.gz  optional (GPU_CARRY_BUNDLE=DIR.tar.gz, made by scripts/gpu-bundle.sh): the
#                  prebuilt GPU-flavour binaries and their libraries, carried as their own part by
#                  a call of its own (rebuilding the bundle leaves the model parts as they are);
#                  when SHA256SUMS names it, gpu-run.sh waits for it like for a numbered part; and
# googletest.tar.gz (GoogleTest's sources, under 1 MB, for a device without a system gtest; every
# call carries it), with SHA256SUMS (of the tar, every part and googletest.tar.gz). scripts/gpu-run.sh on the device stores each part it
# is carried, joins them once all are there and checks the sums before using anything.
#
# Exit status: 0 packed; 1 an input is missing or a part would be too large.
# Environment: GPU_CARRY_MODEL, GPU_CARRY_DRAFTER, GPU_CARRY_PART_MIB, GPU_CARRY_BUNDLE.
# Usage: scripts/gpu-carry.sh   (then the run(...) calls in docs/gpu.md, one per part)
set -euo pipefail
cd "$(dirname "$0")/.."
cache=$HOME/.cache/tlt
model=${GPU_CARRY_MODEL:-$cache/models/SmolLM2-135M-Instruct.Q4_1.gguf}
drafter=${GPU_CARRY_DRAFTER:-$(ls -t "$cache"/drafter/generations-*.ckpt 2>/dev/null | head -1)}
part_mib=${GPU_CARRY_PART_MIB:-60}
out=.cache/gpu-carry
[[ -f $model ]] || { echo "FAIL: carry: no model $model (GPU_CARRY_MODEL)"; exit 1; }
if [[ $drafter != none && ! -f $drafter ]]; then
  echo "FAIL: carry: no drafter checkpoint (GPU_CARRY_DRAFTER=FILE, or none: the device trains it)"
  exit 1
fi

stage=$(mktemp -d /tmp/tlt-gpu-carry.XXXXXX)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/payload"
ln -s "$(realpath "$model")" "$stage/payload/model.gguf"
[[ $drafter == none ]] || ln -s "$(realpath "$drafter")" "$stage/payload/drafter.ckpt"
bundle=${GPU_CARRY_BUNDLE:-}
if [[ -n $bundle && ! -f $bundle ]]; then
  echo "FAIL: carry: no bundle tarball $bundle (scripts/gpu-bundle.sh makes .cache/gpu-bundle.tar.gz)"
  exit 1
fi
{
  echo "model $(basename "$model") $(sha256sum "$model" | cut -d' ' -f1)"
  [[ $drafter == none ]] || echo "drafter $(basename "$drafter") $(sha256sum "$drafter" | cut -d' ' -f1)"
} >"$stage/payload/SOURCES"
# -h: follow the links; no compression (GGUF and checkpoints hardly compress).
tar -C "$stage/payload" -chf "$stage/carry.tar" .

rm -rf "$out" && mkdir -p "$out"
# As few parts as the limit allows, of equal size (each call carries the source tree too).
total=$(stat -c %s "$stage/carry.tar")
limit=$((part_mib * 1024 * 1024))
n=$(((total + limit - 1) / limit))
split -n "$n" -d -a 1 "$stage/carry.tar" "$out/part-"
for i in $(seq $((n - 1)) -1 0); do mv "$out/part-$i" "$out/part-$((i + 1))"; done
if [[ -f /usr/src/googletest/CMakeLists.txt ]]; then
  tar -C /usr/src -czf "$out/googletest.tar.gz" googletest
fi
[[ -z $bundle ]] || cp "$bundle" "$out/bundle.tar.gz"
{
  echo "$(sha256sum "$stage/carry.tar" | cut -d' ' -f1)  carry.tar"
  (cd "$out" && sha256sum part-* $(ls googletest.tar.gz bundle.tar.gz 2>/dev/null))
} >"$out/SHA256SUMS"
echo "$n" >"$out/PARTS"
# Every part travels with SHA256SUMS, PARTS (a few hundred bytes) and googletest.tar.gz.
size=0
for i in $(seq 1 "$n"); do
  size=$(($(stat -c %s "$out/part-$i") > size ? $(stat -c %s "$out/part-$i") : size))
  if ((size > limit)); then
    echo "FAIL: carry: part-$i is $size bytes"
    exit 1
  fi
done
tree_mib=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | awk '{printf "%d", $1 / 1048576 + 1}')
size=$((size + $(stat -c %s "$out/googletest.tar.gz" 2>/dev/null || echo 0)))
if ((size + tree_mib * 1048576 > 64 * 1048576)); then
  echo "FAIL: carry: a part and the source tree ($tree_mib MiB) pass the 64 MiB a call carries"
  exit 1
fi
if [[ -n $bundle ]]; then
  bsize=$(($(stat -c %s "$out/bundle.tar.gz") + $(stat -c %s "$out/googletest.tar.gz" 2>/dev/null || echo 0)))
  if ((bsize + tree_mib * 1048576 > 64 * 1048576)); then
    echo "FAIL: carry: the bundle ($bsize bytes) and the source tree pass the 64 MiB a call carries"
    exit 1
  fi
fi
echo "PASS: carry: $n part(s) of at most $part_mib MiB in $out (tar $(du -h "$stage/carry.tar" | cut -f1);" \
  "source tree about $tree_mib MiB); model $(basename "$model"), drafter $(basename "$drafter")"
# The calls in order: every one but the last runs `scripts/gpu-run.sh receive`.
files=() k=0
[[ -z $bundle ]] || files+=(bundle.tar.gz)
for i in $(seq 1 "$n"); do files+=("part-$i"); done
for f in "${files[@]}"; do
  k=$((k + 1))
  cmd="scripts/gpu-run.sh receive"
  ((k == ${#files[@]})) && cmd="scripts/gpu-run.sh"
  echo "  call $k: $cmd; carry [\".cache/gpu-carry/$f\", \".cache/gpu-carry/SHA256SUMS\"," \
    "\".cache/gpu-carry/PARTS\", \".cache/gpu-carry/googletest.tar.gz\"]"
done
