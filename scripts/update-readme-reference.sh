#!/usr/bin/env bash
# Rewrites the configuration reference in README.md from `tlt explain`.
# Usage: scripts/update-readme-reference.sh [TLT_BINARY]
set -euo pipefail
cd "$(dirname "$0")/.."
tlt=${1:-build/bin/tlt}
ref=$(mktemp)
"$tlt" explain >"$ref"
python3 - "$ref" <<'PY'
import re, sys
ref = open(sys.argv[1]).read()
readme = open("README.md").read()
begin, end = "<!-- BEGIN tlt explain -->", "<!-- END tlt explain -->"
head, rest = readme.split(begin, 1)
_, tail = rest.split(end, 1)
open("README.md", "w").write(head + begin + "\n" + ref + end + tail)
PY
rm -f "$ref"
echo "README.md reference updated"
