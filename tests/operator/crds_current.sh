#!/usr/bin/env bash
# crds/ must hold exactly what `tlt-operator --write-crds` generates from api/spec.h, and
# `--print-crds` must print the same documents.
# Usage: crds_current.sh TLT_OPERATOR_BINARY SOURCE_DIR
set -u
op=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$op" --write-crds "$tmp" >/dev/null || { echo "FAIL: tlt-operator --write-crds failed"; exit 1; }
fail=0
crds=("$tmp"/*.yaml)
for f in "${crds[@]}"; do
  name=$(basename "$f")
  if ! diff -u "$src/crds/$name" "$f" >"$tmp/diff" 2>&1; then
    echo "FAIL: crds/$name is stale or missing; run scripts/update-crds.sh"
    head -40 "$tmp/diff"
    fail=1
  fi
done
for f in "$src"/crds/*.yaml; do
  [ -e "$tmp/$(basename "$f")" ] || { echo "FAIL: crds/$(basename "$f") is not generated any more"; fail=1; }
done
# --print-crds: the same files, separated by ---.
want=$(for f in "$tmp"/rljobs.tlt.dev.yaml "$tmp"/tstpretrainjobs.tlt.dev.yaml; do cat "$f"; echo ---; done | sed '$d')
[ "$("$op" --print-crds)" == "$want" ] || { echo "FAIL: --print-crds differs from --write-crds"; fail=1; }
[ $fail -eq 0 ] && echo "crds/ matches tlt-operator --write-crds (${#crds[@]} CRDs)"
exit $fail
