#!/usr/bin/env bash
# Every ```yaml block of docs/datasets.md and docs/rewards.md is a whole manifest that
# `tlt validate` accepts as written, run from the checkout's root as the pages say (issue 55): its
# dataset, model and reward program are the checkout's (or the pods', which validate notes).
# Usage: docs_manifests.sh TLT_BINARY SOURCE_DIR
set -u
tlt=$1; src=$2
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$src" || exit 1
export PYTHONDONTWRITEBYTECODE=1
fail=0 n=0
for page in docs/datasets.md docs/rewards.md; do
  # Each block to its own file: PAGE-K.yaml.
  awk -v out="$work/$(basename "$page" .md)" '
    /^```yaml[[:space:]]*$/ { on = 1; k++; file = out "-" k ".yaml"; printf "" > file; next }
    /^```/ { on = 0; next }
    on { print > file }' "$page"
done
for f in "$work"/*.yaml; do
  n=$((n + 1))
  head -1 "$f" | grep -q '^apiVersion: ' || { echo "FAIL $(basename "$f"): not a whole manifest (no apiVersion first):"; cat "$f"; fail=1; continue; }
  out=$("$tlt" validate "$f" 2>&1) || { echo "FAIL $(basename "$f"):"; echo "$out"; fail=1; continue; }
  grep -q ': ok (' <<<"$out" || { echo "FAIL $(basename "$f"): $out"; fail=1; }
done
[ "$n" -ge 4 ] || { echo "FAIL: only $n yaml blocks found"; fail=1; }
[ $fail -eq 0 ] && echo "docs: $n manifests in docs/datasets.md and docs/rewards.md validate as written"
exit $fail
