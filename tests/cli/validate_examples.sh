#!/usr/bin/env bash
# `tlt validate` as a user runs it: ok for every example, non-zero with the exact field path for
# every malformed manifest. Usage: validate_examples.sh TLT_BINARY SOURCE_DIR
set -u
tlt=$1; src=$2; fail=0
# The examples name files relative to the checkout's root (docs/datasets.md, "Paths").
cd "$src" || exit 1
out=$("$tlt" validate "$src"/examples/*.yaml 2>&1) || { echo "examples failed:"; echo "$out"; exit 1; }
n_ok=$(grep -c ': ok (' <<<"$out")
n_ex=$(ls "$src"/examples/*.yaml | wc -l)
[ "$n_ok" -eq "$n_ex" ] || { echo "expected $n_ex ok lines, got $n_ok:"; echo "$out"; exit 1; }

# One run over all malformed manifests (each start loads LibTorch), then each file's section.
bad=("$src"/tests/manifests/bad/*.yaml)
if all=$("$tlt" validate "${bad[@]}" 2>&1); then echo "FAIL: malformed manifests accepted"; exit 1; fi
for f in "${bad[@]}"; do
  section=$(awk -v head="$f: " 'index($0, head) == 1 {on = 1; next} /^[^ ]/ {on = 0} on' <<<"$all")
  [ -n "$section" ] || { echo "FAIL $f: no errors reported"; fail=1; continue; }
  while IFS= read -r line; do
    path=${line#\# expect: }; path=${path%% | *}
    if [ -z "$path" ]; then pat="^  YAML"; else pat="^  ${path//[/\\[}: "; fi
    grep -q -- "$pat" <<<"$section" || { echo "FAIL $f: no error at '$path' in:"; echo "$section"; fail=1; }
  done < <(grep '^# expect: ' "$f")
done
"$tlt" validate /nonexistent.yaml >/dev/null 2>&1 && { echo "FAIL: missing file accepted"; fail=1; }
[ $fail -eq 0 ] && echo "validate: $n_ex examples ok, ${#bad[@]} malformed manifests rejected at their paths"
exit $fail
