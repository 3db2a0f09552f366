# syntax=docker/dockerfile:1
# The tlt runtime image: `tlt` (the container of every job pod, and the local runner) and
# `tlt-data`, on Debian bookworm with Debian's CPU LibTorch 1.13 and BLIS as the BLAS
# (DESIGN.md section 7). Build from the repository root:
#   docker build -f docker/runtime.Dockerfile -t tlt:0.1.0 .
# or without Docker or a registry: scripts/images.sh (Debian's buildah; docs/images.md).
# The Helm chart's runtimeImage (the operator's --runtime-image) names this image.
# Its CUDA variant (PyTorch's CUDA LibTorch on NVIDIA's images): docker/runtime-cuda.Dockerfile.
# tests/helm/dockerfiles.sh checks this file: COPY sources exist, the binaries are CMake
# targets that configure and resolve from exactly what is copied, the packages exist in
# bookworm, and the final stage's packages provide every shared library the binaries need.

# ---- build: the same stage as docker/operator.Dockerfile's (one cached build for both) ------
FROM debian:bookworm AS build
ENV DEBIAN_FRONTEND=noninteractive
# The build packages of scripts/setup.sh, less the test-only ones (gtest, prometheus, clang).
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      cmake ninja-build g++ pkg-config ca-certificates \
      libtorch-dev libgloo-dev libblis4-openmp \
      libyaml-cpp-dev nlohmann-json3-dev libcli11-dev \
      libcpprest-dev libssl-dev prometheus-cpp-dev libsentencepiece-dev \
      cargo-web rustc-web \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY CMakeLists.txt ./
COPY scripts/build.sh scripts/
COPY api api
COPY kube kube
COPY operator operator
COPY runtime runtime
COPY bench bench
# The tokenizers crate (runtime/tokenizer): bookworm's cargo-web (Rust 1.96) fetches it, then the
# build compiles it offline, as scripts/setup.sh and build.sh do outside a container.
RUN cargo fetch --locked --manifest-path runtime/tokenizer/Cargo.toml
RUN scripts/build.sh -DTLT_TESTS=OFF -DCMAKE_BUILD_TYPE=Release
RUN strip --strip-unneeded build/bin/tlt build/bin/tlt-data build/bin/tlt-operator

# ---- binaries: what the image runs, at / ------------------------------------------------------
# `--build-context binaries=DIR` (buildah, docker buildx) replaces this stage by a directory of
# prebuilt tlt, tlt-data and tlt-operator, and the build stage is then skipped:
# scripts/images.sh --prebuilt build/bin. The operator image's stage is the same.
FROM scratch AS binaries
COPY --from=build /src/build/bin/tlt /src/build/bin/tlt-data /src/build/bin/tlt-operator /

# ---- the image -----------------------------------------------------------------------------
FROM debian:bookworm-slim
ENV DEBIAN_FRONTEND=noninteractive
# Shared libraries of tlt and tlt-data (LibTorch, yaml-cpp, cpprestsdk, prometheus-cpp,
# sentencepiece), BLIS selected for libblas.so.3, and gnuplot for the report pictures.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libtorch1.13 libblis4-openmp libyaml-cpp0.7 libcpprest2.10 libssl3 \
      libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 libsentencepiece0 \
      gnuplot-nox ca-certificates \
 && update-alternatives --set "libblas.so.3-$(uname -m)-linux-gnu" \
      "/usr/lib/$(uname -m)-linux-gnu/blis-openmp/libblas.so.3" \
 && rm -rf /var/lib/apt/lists/*
COPY --from=binaries /tlt /tlt-data /usr/local/bin/
COPY examples /usr/share/tlt/examples
# Every shared library resolves: a package missing above fails the build here, not in a pod.
RUN ! ldd /usr/local/bin/tlt /usr/local/bin/tlt-data | grep "not found"
# LibTorch and BLIS otherwise use one thread here (DESIGN.md section 7); pods override these
# from their CPU limit.
ENV OMP_NUM_THREADS=2 BLIS_NUM_THREADS=2
RUN groupadd --gid 65532 tlt && useradd --uid 65532 --gid 65532 --no-create-home \
      --home-dir /nonexistent --shell /usr/sbin/nologin tlt
USER 65532:65532
WORKDIR /tmp
ENTRYPOINT ["tlt"]
CMD ["--help"]
