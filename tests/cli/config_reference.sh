#!/usr/bin/env bash
# docs/configuration.md's generated reference must be exactly what `tlt explain` prints.
# Usage: config_reference.sh TLT_BINARY SOURCE_DIR
set -u
tlt=$1; src=$2
want=$("$tlt" explain)
got=$(awk '/<!-- BEGIN tlt explain -->/ {on=1; next} /<!-- END tlt explain -->/ {on=0} on' "$src/docs/configuration.md")
if [ "$want" != "$got" ]; then
  echo "docs/configuration.md is stale; run scripts/update-config-reference.sh"
  diff <(echo "$want") <(echo "$got") | head -20
  exit 1
fi
echo "docs/configuration.md matches tlt explain"
