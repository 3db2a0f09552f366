#!/usr/bin/env bash
# gpu-toolkit.sh: the CUDA toolkit root (nvcc, its headers and libcudart) that the GPU flavour
# configures with (TorchConfig enables CMake's CUDA language), printed on stdout. The first of:
# CUDA_HOME, the folder above the nvcc on PATH, /usr/local/cuda; else one assembled from the
# nvidia-* wheels next to torch (pip install "cuda-toolkit[nvcc,crt,nvvm,cccl,cudart]==<torch's
# CUDA>", which scripts/gpu-venv.sh does) as a folder of symlinks, CACHE/cuda-<CUDA>-wheels.
# Used by scripts/gpu-check.sh and scripts/gpu-bundle.sh.
#
# Exit status: 0 the root on stdout; 1 none (why, and what to install, on stderr).
# Usage: scripts/gpu-toolkit.sh TORCH_DIR TORCH_CUDA [CACHE]
#   TORCH_DIR   os.path.dirname(torch.__file__); TORCH_CUDA: torch.version.cuda, e.g. 13.0;
#   CACHE       default ~/.cache/tlt
set -uo pipefail
torch_dir=${1:?TORCH_DIR} torch_cuda=${2:?TORCH_CUDA} cache=${3:-$HOME/.cache/tlt}

# The wheels' layout, nvidia/cu<major>/, has bin/nvcc, include, lib and nvvm but no lib64 and no
# unversioned .so, and nvcc.profile expects targets/<arch>/{include,lib}.
assemble() {
  local wheel=$1 dir=$2 arch f
  arch=$(uname -m)-linux
  rm -rf "$dir" && mkdir -p "$dir/bin" "$dir/targets/$arch/lib" || return 1
  for f in "$wheel"/bin/*; do ln -s "$f" "$dir/bin/"; done
  ln -s "$wheel/nvvm" "$dir/nvvm"
  ln -s "$wheel/include" "$dir/targets/$arch/include"
  ln -s "targets/$arch/include" "$dir/include"
  for f in "$wheel"/lib/*; do ln -s "$f" "$dir/targets/$arch/lib/"; done
  ln -s "targets/$arch/lib" "$dir/lib64"
  for f in "$dir/targets/$arch/lib"/*.so.*; do
    [[ -e ${f%%.so.*}.so ]] || ln -s "$(basename "$f")" "${f%%.so.*}.so"
  done
}

nvcc_on_path=$(command -v nvcc 2>/dev/null)
for d in "${CUDA_HOME:-}" "${nvcc_on_path:+$(dirname "$(dirname "$nvcc_on_path")")}" /usr/local/cuda; do
  if [[ -n $d && -x $d/bin/nvcc ]]; then
    echo "$d"
    exit 0
  fi
done
wheel=$(dirname "$torch_dir")/nvidia/cu${torch_cuda%%.*}
if [[ -x $wheel/bin/nvcc ]]; then
  dir=$cache/cuda-$torch_cuda-wheels
  # Assembled once per wheel folder: again when its links lead to another (or none).
  if [[ $(readlink "$dir/bin/nvcc") != "$wheel/bin/nvcc" || ! -x $dir/bin/nvcc ]]; then
    assemble "$wheel" "$dir" || { echo "cannot assemble $dir from $wheel" >&2; exit 1; }
  fi
  echo "$dir"
  exit 0
fi
echo "no nvcc (CUDA_HOME, PATH, /usr/local/cuda, $wheel); pip install" \
  "\"cuda-toolkit[nvcc,crt,nvvm,cccl,cudart]==$torch_cuda.*\" next to torch" \
  "(scripts/gpu-venv.sh makes such a venv)" >&2
exit 1
