#!/usr/bin/env bash
# The Dockerfiles of docker/, checked by reading them (tests/image builds the Debian ones with
# buildah and runs them; the CUDA one is checked only here): see
# check_dockerfiles.py for the list (COPY sources exist and pass .dockerignore, the build stage
# configures from its COPYs alone and defines the binaries copied out, the apt packages exist
# in bookworm and provide every shared library). hadolint lints them too when it is installed.
# Last line: PASS or FAIL. Usage: dockerfiles.sh SOURCE_DIR BUILD_DIR
set -u
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
T0=$SECONDS
python3 "$src/tests/helm/check_dockerfiles.py" "$src" "$build" ||
  { echo "FAIL: dockerfiles: see the problems above"; exit 1; }
if command -v hadolint >/dev/null 2>&1; then
  hadolint "$src"/docker/*.Dockerfile || { echo "FAIL: dockerfiles: hadolint"; exit 1; }
else
  echo "hadolint is not installed: lint skipped (the checks above ran)"
fi
echo "PASS: dockerfiles: docker/*.Dockerfile reference what exists and build what CMake defines ($((SECONDS - T0)) s; built and run by tests/image)"
