#!/usr/bin/env bash
# Rewrites crds/ from api/spec.h (through `tlt-operator --write-crds`).
# Usage: scripts/update-crds.sh [TLT_OPERATOR_BINARY]
set -euo pipefail
cd "$(dirname "$0")/.."
"${1:-build/bin/tlt-operator}" --write-crds crds
