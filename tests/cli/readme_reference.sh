#!/usr/bin/env bash
# The README's configuration reference must be exactly what `tlt explain` prints.
# Usage: readme_reference.sh TLT_BINARY SOURCE_DIR
set -u
tlt=$1; src=$2
want=$("$tlt" explain)
got=$(awk '/<!-- BEGIN tlt explain -->/ {on=1; next} /<!-- END tlt explain -->/ {on=0} on' "$src/README.md")
if [ "$want" != "$got" ]; then
  echo "README.md's configuration reference is stale; run scripts/update-readme-reference.sh"
  diff <(echo "$want") <(echo "$got") | head -20
  exit 1
fi
echo "README reference matches tlt explain"
