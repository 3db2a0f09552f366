# syntax=docker/dockerfile:1
# The CUDA variant of the tlt runtime image: the same `tlt` and `tlt-data` as
# docker/runtime.Dockerfile, built with -DTLT_GPU=ON against PyTorch's CUDA LibTorch (the torch
# wheel from PyPI, CUDA 13.0, with the nvidia-* wheels it pulls: cuBLAS, cuDNN, NCCL and its
# nccl.h) on NVIDIA's CUDA images (Ubuntu 24.04; Debian has no CUDA LibTorch, DESIGN.md 6b).
# Build from the repository root (a Docker with the NVIDIA container toolkit runs it on GPUs):
#   docker build -f docker/runtime-cuda.Dockerfile -t tlt:0.1.0-cuda13.0 .
# Pins that must agree: the CUDA version of the nvidia/cuda tags (13.0.2) and the CUDA build of
# torch==2.11.0 (the default Linux wheel is +cu130); tests/helm/dockerfiles.sh checks them against
# the CUDA torch of scripts/gpu-check.sh when this machine has one.
# Not here: Gloo's headers (Debian's libgloo-dev does not match PyTorch's bundled Gloo), so
# data parallelism on CPU tensors answers Unimplemented in this image; NCCL serves CUDA tensors.
# tests/helm/dockerfiles.sh checks this file: COPY sources exist, the build stage copies what
# runtime.Dockerfile's does and configures from exactly that with a CUDA torch, the binaries
# are CMake targets, the final stage installs no build tools and runs as a numeric non-root user.

# ---- build ---------------------------------------------------------------------------------
FROM nvidia/cuda:13.0.2-devel-ubuntu24.04 AS build
ENV DEBIAN_FRONTEND=noninteractive
# runtime.Dockerfile's build packages (its Ubuntu names), less LibTorch, Gloo and BLIS: the torch
# wheel brings its own LibTorch, BLAS (MKL) and OpenMP. nvcc comes with the devel image.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      cmake ninja-build g++ pkg-config ca-certificates python3 python3-pip \
      libyaml-cpp-dev nlohmann-json3-dev libcli11-dev \
      libcpprest-dev libssl-dev prometheus-cpp-dev libsentencepiece-dev \
 && rm -rf /var/lib/apt/lists/*
# LibTorch: torch and its nvidia-* wheels, as plain files in /opt/torch (torch/ and nvidia/ side
# by side, as libtorch_cuda.so's RPATH $ORIGIN/../../nvidia/... expects).
RUN python3 -m pip install --no-cache-dir --target /opt/torch torch==2.11.0 \
 && rm -rf /opt/torch/triton /opt/torch/torch/test
WORKDIR /src
COPY CMakeLists.txt ./
COPY scripts/build.sh scripts/
COPY api api
COPY kube kube
COPY operator operator
COPY runtime runtime
COPY bench bench
RUN scripts/build.sh -DTLT_GPU=ON -DTLT_TESTS=OFF -DCMAKE_BUILD_TYPE=Release \
      "-DCMAKE_PREFIX_PATH=/opt/torch/torch/share/cmake;/opt/torch/torch"
# The Ubuntu packages whose shared libraries tlt and tlt-data load (yaml-cpp, cpprestsdk,
# prometheus-cpp, sentencepiece, OpenSSL...), found from the binaries rather than spelled here;
# LibTorch and CUDA come from /opt/torch.
RUN for lib in $(ldd build/bin/tlt build/bin/tlt-data | awk '$3 ~ /^\/(usr\/)?lib\// {print $3}' \
                 | sort -u); do \
      dpkg -S "$lib" 2>/dev/null || dpkg -S "$(realpath "$lib")"; \
    done | cut -d: -f1 | sort -u > build/runtime-packages.txt \
 && cat build/runtime-packages.txt

# ---- the image -----------------------------------------------------------------------------
FROM nvidia/cuda:13.0.2-base-ubuntu24.04
ENV DEBIAN_FRONTEND=noninteractive
COPY --from=build /src/build/runtime-packages.txt /tmp/
RUN apt-get update \
 && xargs -a /tmp/runtime-packages.txt apt-get install -y --no-install-recommends \
 && apt-get install -y --no-install-recommends gnuplot-nox ca-certificates \
 && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages.txt
COPY --from=build /opt/torch/torch/lib /opt/torch/torch/lib
COPY --from=build /opt/torch/nvidia /opt/torch/nvidia
COPY --from=build /src/build/bin/tlt /src/build/bin/tlt-data /usr/local/bin/
COPY examples /usr/share/tlt/examples
# Every shared library resolves (the binaries' RUNPATH names /opt/torch/torch/lib).
RUN ! ldd /usr/local/bin/tlt /usr/local/bin/tlt-data | grep "not found"
ENV OMP_NUM_THREADS=2
RUN groupadd --gid 65532 tlt && useradd --uid 65532 --gid 65532 --no-create-home \
      --home-dir /nonexistent --shell /usr/sbin/nologin tlt
USER 65532:65532
WORKDIR /tmp
ENTRYPOINT ["tlt"]
CMD ["--help"]
