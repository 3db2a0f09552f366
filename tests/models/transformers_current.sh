#!/usr/bin/env bash
# The transformers reference fixtures in tests/models/fixtures (tiny-qwen2-transformers and
# smollm2-transformers.json, which pretrained_test's Transformers.* compare our forward to) are what
# make_transformers_parity.py writes with Hugging Face transformers now: reruns it into a scratch
# directory and compares. Needs scripts/setup.sh's ~/.cache/tlt/venv-hf (Debian's python3-torch +
# transformers 4.40.2) and, for SmolLM2, the Hugging Face directory setup.sh converts.
# Usage: transformers_current.sh SOURCE_DIR
set -euo pipefail
src=$1
py=${TLT_VENV_HF:-$HOME/.cache/tlt/venv-hf}/bin/python
hf=${TLT_SMOLLM2_HF:-$HOME/.cache/tlt/models/SmolLM2-135M-Instruct-hf}
[ -x "$py" ] || { echo "FAIL: no $py: run scripts/setup.sh"; exit 1; }
[ -f "$hf/config.json" ] || { echo "FAIL: no $hf: run scripts/setup.sh"; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
script=$src/tests/models/make_transformers_parity.py
"$py" "$script" qwen2 --check "$out" | tail -1
"$py" "$script" smollm2 --hf "$hf" --check "$out" | tail -1
