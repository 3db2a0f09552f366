#!/usr/bin/env bash
# The newcomer's first command: installs what is missing, builds, and runs the embedded default,
# the tiny RL job, on this machine.
# Usage: scripts/try.sh [EXTRA tlt run FLAGS]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --runtime       # what building and running tlt needs: no test tools
scripts/build.sh --target tlt   # the runtime binary only: no tests, no operator
echo "try: build/bin/tlt run examples/rljob-tiny.yaml $*"
exec build/bin/tlt run examples/rljob-tiny.yaml "$@"
