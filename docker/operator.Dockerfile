# syntax=docker/dockerfile:1
# The tlt-operator image: the operator binary alone (no LibTorch at run time), non-root, on
# debian:bookworm-slim. Build from the repository root:
#   docker build -f docker/operator.Dockerfile -t tlt-operator:0.1.0 .
# or without Docker or a registry: scripts/images.sh (Debian's buildah; docs/images.md).
# The Helm chart's image.repository/tag name this image.
# The build stage is docker/runtime.Dockerfile's, word for word, so that building both images
# builds once (the top-level CMakeLists.txt needs LibTorch to configure even for the operator).
# tests/helm/dockerfiles.sh checks this file as it checks runtime.Dockerfile.

# ---- build: the same stage as docker/runtime.Dockerfile's (one cached build for both) -------
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

# ---- binaries: the same stage as docker/runtime.Dockerfile's --------------------------------
# `--build-context binaries=DIR` replaces it by prebuilt binaries (scripts/images.sh --prebuilt).
FROM scratch AS binaries
COPY --from=build /src/build/bin/tlt /src/build/bin/tlt-data /src/build/bin/tlt-operator /

# ---- the image -----------------------------------------------------------------------------
FROM debian:bookworm-slim
ENV DEBIAN_FRONTEND=noninteractive
# Shared libraries of tlt-operator: yaml-cpp, cpprestsdk, OpenSSL, prometheus-cpp.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libyaml-cpp0.7 libcpprest2.10 libssl3 libprometheus-cpp-core1.0 ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=binaries /tlt-operator /usr/local/bin/tlt-operator
# Every shared library resolves: a package missing above fails the build here, not in a pod.
RUN ! ldd /usr/local/bin/tlt-operator | grep "not found"
# The chart runs it as 65532 with a read-only root filesystem; it writes nothing.
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["tlt-operator"]
