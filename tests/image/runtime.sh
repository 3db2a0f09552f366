#!/usr/bin/env bash
# The runtime image tlt:VERSION (tests/image/build.sh builds it) runs jobs as a pod runs it: as
# the image's non-root USER with its ENV and WORKDIR, a read-only root file system, a tmpfs /tmp,
# TLT_CACHE on a writable mount and the corpora on a read-only one (tests/image/run_in_image.sh):
#   1. the root is read-only and the user is not root;
#   2. `tlt version` names this version and LibTorch;
#   3. `tlt validate --spec-only` of the examples the image ships (they name files of a checkout
#      and ~/.cache/tlt/models, not the image's): every one ok;
#   4. examples/rljob-tiny.yaml cut to 3 steps (small warm start and held-out set): 3 steps in
#      its report;
#   5. a tiny TSTPretrainJob (tests/manifests/e2e/tst-e2e.yaml): its report's held-out loss.
# Last line: PASS or FAIL, naming the step.
# Usage: runtime.sh SOURCE_DIR
set -uo pipefail
src=$(cd "$1" && pwd)
source "$src/tests/image/common.sh"
image_begin image.runtime
trap 'image_track; image_cleanup' EXIT

IMG_STEP="a working container of $(image_ref tlt)"
root=$(image_rootfs tlt) || image_fail "see above"
image_track
cache=$IMG_WORK/cache
mkdir -p "$cache"
chown "$(image_config tlt '{{.OCIv1.Config.User}}')" "$cache"
data=${TLT_DATA_DIR:-${TLT_CACHE:-$HOME/.cache/tlt}/data}
[[ -d $data/sotu ]] || image_fail "no corpus sotu in $data (scripts/setup.sh fetches it)"
image_run_args tlt
in_image() {  # CMD... in the image, bounded; output in $IMG_WORK/out.log
  timeout 600 "$src/tests/image/run_in_image.sh" "$root" "${IMG_RUN_ARGS[@]}" \
    --bind "$cache:/cache" --bind "$data:/data:ro" \
    --env TLT_CACHE=/cache --env TLT_DATA_DIR=/data --env HOME=/nonexistent -- "$@" \
    >"$IMG_WORK/out.log" 2>&1
}
show() { tail -n 25 "$IMG_WORK/out.log"; }

IMG_STEP="1. read-only root, non-root user"
in_image sh -c 'id -u; touch /usr/local/bin/x 2>&1; touch /cache/w && echo cache-writable' || true
grep -qx '65532' "$IMG_WORK/out.log" || { show; image_fail "not running as uid 65532"; }
grep -q 'Read-only file system' "$IMG_WORK/out.log" || { show; image_fail "the root file system is writable"; }
grep -qx 'cache-writable' "$IMG_WORK/out.log" || { show; image_fail "TLT_CACHE (/cache) is not writable"; }

IMG_STEP="2. tlt version"
in_image tlt version || { show; image_fail "exited non-zero"; }
grep -q "^tlt $IMG_VERSION\$" "$IMG_WORK/out.log" || { show; image_fail "no 'tlt $IMG_VERSION' line"; }
grep -q '^libtorch ' "$IMG_WORK/out.log" || { show; image_fail "no libtorch line"; }

IMG_STEP="3. tlt validate --spec-only /usr/share/tlt/examples/*.yaml"
in_image sh -c 'tlt validate --spec-only /usr/share/tlt/examples/*.yaml' || { show; image_fail "exited non-zero"; }
n_ex=$(ls "$root"/usr/share/tlt/examples/*.yaml | wc -l)
n_ok=$(grep -c ': ok (' "$IMG_WORK/out.log")
[[ $n_ex -gt 0 && $n_ok -eq $n_ex ]] || { show; image_fail "$n_ok of $n_ex examples ok"; }

IMG_STEP="4. a 3-step RLJob (examples/rljob-tiny.yaml)"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
sed -e 's/^\(    steps:\).*/\1 3/' -e 's/^\(    warmStartSteps:\).*/\1 40/' \
  -e 's/^\(    heldOut:\).*/\1 8/' -e 's/^\(    promptsPerStep:\).*/\1 4/' \
  -e 's/^\(    groupSize:\).*/\1 4/' -e 's|^\(    path:\) .tlt/rljob-tiny|\1 /cache/rl|' \
  -e "s/^\(    port:\) 9400/\1 $port/" "$src/examples/rljob-tiny.yaml" >"$cache/rl.yaml"
grep -q '^    steps: 3$' "$cache/rl.yaml" && grep -q 'path: /cache/rl$' "$cache/rl.yaml" ||
  image_fail "examples/rljob-tiny.yaml no longer has the fields this test shortens"
in_image tlt run /cache/rl.yaml || { show; image_fail "tlt run exited non-zero"; }
python3 - "$cache/rl/report/tlt.json" <<'PY' || { show; image_fail "its report"; }
import json, sys
steps = json.load(open(sys.argv[1]))["steps"]
assert [s["step"] for s in steps] == [1, 2, 3], "steps %s" % [s["step"] for s in steps]
print("image.runtime: RLJob: 3 steps, mean reward %s" % [round(s["rewardMean"], 3) for s in steps])
PY

IMG_STEP="5. a tiny TSTPretrainJob (tests/manifests/e2e/tst-e2e.yaml)"
sed "s|PLACEHOLDER|/cache/tst|" "$src/tests/manifests/e2e/tst-e2e.yaml" >"$cache/tst.yaml"
in_image tlt run /cache/tst.yaml || { show; image_fail "tlt run exited non-zero"; }
python3 - "$cache/tst/report/report.json" <<'PY' || { show; image_fail "its report"; }
import json, sys
r = json.load(open(sys.argv[1]))
points = r["tst"]
assert points and points[-1]["heldOutLoss"] > 0, "no held-out loss: %s" % points[-1:]
print("image.runtime: TSTPretrainJob: held-out loss %.3f -> %.3f" % (points[0]["heldOutLoss"], points[-1]["heldOutLoss"]))
PY
echo "PASS: image.runtime: $(image_ref tlt) as uid 65532 on a read-only root: version, validate ($n_ex examples), a 3-step RLJob, a TSTPretrainJob ($((SECONDS - IMG_T0)) s)"
