#!/usr/bin/env bash
# The tiny checkpoints and dequantisation fixtures in tests/models/fixtures are exactly what
# make_tiny_models.py writes (numpy, gguf and safetensors from scripts/setup.sh's venv): the
# references the C++ tests compare to come from the committed script, not from hand edits.
# Usage: fixtures_current.sh SOURCE_DIR
set -euo pipefail
src=$1
py=${TLT_VENV:-$HOME/.cache/tlt/venv}/bin/python
[ -x "$py" ] || { echo "no $py: run scripts/setup.sh"; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$py" "$src/tests/models/make_tiny_models.py" --out "$out" >/dev/null
status=0
for f in $(cd "$out" && find . -type f | sort); do
  if ! cmp -s "$out/$f" "$src/tests/models/fixtures/$f"; then
    echo "FAIL: tests/models/fixtures/$f differs from what make_tiny_models.py writes now"
    status=1
  fi
done
[ $status -eq 0 ] && echo "ok: $(cd "$out" && find . -type f | wc -l) fixture files are current"
exit $status
