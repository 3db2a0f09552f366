#!/usr/bin/env bash
# gpu-venv.sh: the CUDA PyTorch the GPU flavour is built against on a machine without a GPU
# (docs/gpu.md, "The device run"): a venv with pip's torch (the default Linux x86_64 wheel is the
# CUDA build, with NCCL as the nvidia-nccl-cu13 wheel) and nvcc with its headers from the
# cuda-toolkit wheels of the same CUDA, pinned to the device's (torch 2.11.0, CUDA 13.0).
# scripts/gpu-check.sh (TLT_PYTHON=DIR/bin/python3) assembles a toolkit root from those wheels;
# scripts/gpu-bundle.sh runs this script when its default venv has no torch.
#
# Idempotent: a venv whose torch and nvcc are the pinned ones is left as it is. The wheels are
# about 4 GB; pip runs under `nice`, its log in DIR/pip.log.
# Exit status: 0 the venv is ready; 1 pip failed (the log's tail is printed).
# Environment: GPU_VENV_TORCH (default 2.11.0), GPU_VENV_CUDA (default 13.0.2, the cuda-toolkit
# wheel's version; its major.minor must be torch's CUDA), GPU_VENV_NICE (default 15).
# Usage: scripts/gpu-venv.sh [DIR]   (default ~/.cache/tlt/venv-cuda)
set -uo pipefail
dir=${1:-$HOME/.cache/tlt/venv-cuda}
torch=${GPU_VENV_TORCH:-2.11.0}
cuda=${GPU_VENV_CUDA:-13.0.2}
py=$dir/bin/python3
ready() {
  "$py" - "$torch" "$cuda" 2>/dev/null <<'PY'
import glob, os, sys, torch
want_torch, want_cuda = sys.argv[1], sys.argv[2]
site = os.path.dirname(os.path.dirname(torch.__file__))
major = want_cuda.split(".")[0]
ok = (torch.__version__.split("+")[0] == want_torch and torch.version.cuda is not None
      and want_cuda.startswith(torch.version.cuda) and
      os.access(os.path.join(site, "nvidia", "cu" + major, "bin", "nvcc"), os.X_OK) and
      glob.glob(os.path.join(site, "nvidia", "nccl", "include", "nccl.h")))
sys.exit(0 if ok else 1)
PY
}
if ready; then
  echo "PASS: venv: $dir has torch $torch (CUDA ${cuda%.*}) and nvcc"
  exit 0
fi
[[ -x $py ]] || python3 -m venv "$dir" || { echo "FAIL: venv: python3 -m venv $dir"; exit 1; }
echo "venv: installing torch==$torch and cuda-toolkit==$cuda (nvcc) into $dir (log $dir/pip.log)"
t=$SECONDS
if ! nice -n "${GPU_VENV_NICE:-15}" "$py" -m pip install --progress-bar off "torch==$torch" \
  "cuda-toolkit[nvcc,crt,nvvm,cccl,cudart]==$cuda" >"$dir/pip.log" 2>&1; then
  tail -5 "$dir/pip.log"
  echo "FAIL: venv: pip install (see $dir/pip.log)"
  exit 1
fi
ready || { echo "FAIL: venv: installed, but torch $torch with CUDA ${cuda%.*}, nvcc or nccl.h is missing"; exit 1; }
echo "PASS: venv: $dir: torch $torch (CUDA ${cuda%.*}) and nvcc in $((SECONDS - t)) s ($(du -sh "$dir" | cut -f1))"
