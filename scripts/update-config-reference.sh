#!/usr/bin/env bash
# Rewrites the generated part of docs/configuration.md (between its BEGIN and END markers) from
# `tlt explain`, which prints the field tables of api/spec.h.
# Usage: scripts/update-config-reference.sh [TLT_BINARY]
set -euo pipefail
cd "$(dirname "$0")/.."
tlt=${1:-build/bin/tlt}
page=docs/configuration.md
ref=$(mktemp)
"$tlt" explain >"$ref"
python3 - "$ref" "$page" <<'PY'
import sys
ref, page = open(sys.argv[1]).read(), sys.argv[2]
text = open(page).read()
begin, end = "<!-- BEGIN tlt explain -->", "<!-- END tlt explain -->"
head, rest = text.split(begin, 1)
_, tail = rest.split(end, 1)
open(page, "w").write(head + begin + "\n" + ref + end + tail)
PY
rm -f "$ref"
echo "$page updated"
