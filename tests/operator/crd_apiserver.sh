#!/usr/bin/env bash
# The CRDs in crds/ on a real etcd + kube-apiserver (scripts/k8s-env.sh; the binaries come from
# scripts/k8s-tools.sh's cache and are built there once if missing):
#   1. both CRDs are accepted and become Established;
#   2. every example in examples/ is accepted, and what the apiserver stores (its defaults
#      filled in) passes `tlt-operator --check`; a job with nothing but a name gets tlt's defaults;
#   3. every malformed manifest in tests/manifests/bad is refused (server-side dry run), by the
#      apiserver at the field `tlt validate` names, except the few listed below that kubectl
#      itself refuses or reads differently; and a real `kubectl apply` of three of them -- a
#      CEL cross-field rule, a range, an enum -- fails with the expected message;
#   4. `kubectl get rlj` / `tstj` / `tlt` show the printer columns with the values written
#      through the status subresource;
#   5. `kubectl scale rljob/NAME --replicas=3` changes spec.roles.rollout.replicas (and the
#      TSTPretrainJob's workers), and a scale the CEL rules forbid is refused.
# Stops every process it started (by PID) on exit, also on failure. Last line: PASS or FAIL.
# Usage: crd_apiserver.sh TLT_OPERATOR_BINARY SOURCE_DIR     (K8S_BIN=DIR, KEEP=1 as k8s-env.sh)
set -euo pipefail
op=$1
src=$(cd "$2" && pwd)
source "$src/scripts/k8s-env.sh"

k8s_test_begin crd_apiserver
N_EXAMPLES=0
N_BAD=0
# expect_contains TEXT NEEDLE WHAT
expect_contains() {
  [[ $1 == *"$2"* ]] || { printf '%s\n' "$1" | head -20; fail "$3: no \"$2\" in the output above"; }
}

# ---- 1. the CRDs ------------------------------------------------------------------------------
K8S_STEP="kubectl apply -f crds/"
kc apply -f "$src/crds/" >/dev/null
K8S_STEP="the CRDs did not become Established within 60 s"
kc wait --for condition=established --timeout=60s crd/rljobs.tlt.dev crd/tstpretrainjobs.tlt.dev \
  >/dev/null
k8s_say "CRDs established: $(kc get crd -o name | tr '\n' ' ')"
kc create namespace research >/dev/null   # the cluster examples' namespace
kc create namespace tlt-bad >/dev/null    # dry runs of malformed manifests
kc create namespace tlt-apply >/dev/null  # real applies that must fail

# ---- 2. the examples ----------------------------------------------------------------------------
for f in "$src"/examples/*.yaml; do
  K8S_STEP="kubectl apply of $(basename "$f") was refused"
  out=$(kc apply -f "$f" 2>&1) || { echo "$out"; fail "$K8S_STEP"; }
  K8S_STEP="the stored $(basename "$f") does not pass tlt-operator --check"
  kc get -f "$f" -o json >"$K8S_TMP/stored.json"
  "$op" --check "$K8S_TMP/stored.json" || fail "$K8S_STEP"
  N_EXAMPLES=$((N_EXAMPLES + 1))
done
k8s_say "$N_EXAMPLES examples accepted; their stored form passes tlt-operator --check"

K8S_STEP="a job with nothing but a name"
printf 'apiVersion: tlt.dev/v1alpha1\nkind: RLJob\nmetadata: {name: bare}\n' | kc apply -f - >/dev/null
got=$(kc get rljob bare -o 'jsonpath={.spec.roles.rollout.replicas} {.spec.roles.trainer.replicas} {.spec.speculative.arms} {.spec.rebalancing.window} {.spec.model.format}')
[[ $got == '2 1 ["8_4_48","8_4_32","8_4_16","8_4_8"] 60s auto' ]] ||
  fail "the apiserver's defaults of a bare RLJob are not tlt's (got: $got)"
kc get rljob bare -o json >"$K8S_TMP/bare.json"
"$op" --check "$K8S_TMP/bare.json" || fail "the defaulted bare RLJob does not pass tlt-operator --check"
k8s_say "a bare RLJob gets tlt's defaults: $got"

# ---- 3. malformed manifests -----------------------------------------------------------------------
# Refused by kubectl before any request, or read differently by kubectl's YAML 1.1 parser: the
# file name, then "refused: TEXT" (kubectl must fail, saying TEXT) or "accepted: WHY".
declare -A CLIENT_SIDE=(
  [duplicate-key.yaml]="accepted: kubectl's YAML reader keeps the last of two equal keys"
  [enabled-yes.yaml]="accepted: kubectl reads YAML 1.1, where yes is true"
  [kind-typo.yaml]="refused: no matches for kind"
  [wrong-api-version.yaml]="refused: no matches for kind"
  [name-missing.yaml]="refused: name"
  [yaml-syntax.yaml]="refused: error converting YAML to JSON"
)
for f in "$src"/tests/manifests/bad/*.yaml; do
  name=$(basename "$f")
  K8S_STEP="malformed manifest $name"
  rc=0
  out=$(kc create --dry-run=server -n tlt-bad -f "$f" 2>&1) || rc=$?
  if [[ -n ${CLIENT_SIDE[$name]:-} ]]; then
    want=${CLIENT_SIDE[$name]}
    if [[ $want == accepted:* ]]; then
      [[ $rc -eq 0 ]] || { echo "$out"; fail "$name was refused; it is listed as accepted (${want#accepted: }): update the list"; }
    else
      [[ $rc -ne 0 ]] || fail "$name was accepted"
      expect_contains "$out" "${want#refused: }" "$name"
    fi
    continue
  fi
  [[ $rc -ne 0 ]] || fail "$name was accepted by the apiserver; tlt validate refuses it"
  # An unknown field stops the apiserver's strict decoding before any other check; a second dry
  # run that drops unknown fields shows the rest.
  if [[ $out == *"strict decoding error"* ]]; then
    out+=$'\n'$(kc create --dry-run=server --validate=ignore -n tlt-bad -f "$f" 2>&1 || true)
  fi
  # Every field `tlt validate` names must be named by the apiserver too (list indexes aside:
  # CEL rules on a list report the list).
  while IFS= read -r line; do
    path=${line#\# expect: }
    path=${path%% | *}
    path=${path%%\[*}
    expect_contains "$out" "$path" "$name"
  done < <(grep '^# expect: ' "$f")
  N_BAD=$((N_BAD + 1))
done
k8s_say "$N_BAD malformed manifests refused by the apiserver at the fields tlt names;" \
  "${#CLIENT_SIDE[@]} handled by kubectl as listed"

# A real apply of one CEL cross-field rule, one range and one enum: refused, with the message.
apply_refused() {  # FILE NEEDLE...
  local f=$1 out
  shift
  K8S_STEP="kubectl apply of $(basename "$f")"
  if out=$(kc apply -n tlt-apply -f "$src/tests/manifests/bad/$f" 2>&1); then
    fail "$f was accepted"
  fi
  for needle in "$@"; do expect_contains "$out" "$needle" "$f"; done
  k8s_say "refused as expected: $(grep -o 'spec\.[^ ]*: .*' <<<"$out" | sed -n 1p)"
}
apply_refused min-idle-above-rollout.yaml "spec.drafter.training.minIdleWorkers" \
  "must be <= spec.roles.rollout.replicas, or drafter training never starts"
apply_refused temperature-too-high.yaml "spec.algorithm.temperature" \
  "should be less than or equal to 10"
apply_refused task-typo-value.yaml 'spec.task.name: Unsupported value: "arithmetc-cot"' \
  'supported values: "", "arithmetic-cot", "countdown"'
[[ -z $(kc get rljobs -n tlt-apply -o name) ]] || fail "a refused RLJob exists in tlt-apply"

# ---- 4. printer columns and the status subresource ----------------------------------------------
K8S_STEP="status subresource"
kc patch rljob rljob-tiny --subresource=status --type=merge -p \
  '{"status":{"phase":"Running","step":3,"reward":0.5,"reclaimedGPUSeconds":12.5,"roles":{"rollout":{"replicas":2}},"conditions":[{"type":"Admitted","status":"True","reason":"Admitted","message":"by Kueue","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}' \
  >/dev/null
kc patch tstpretrainjob tst-tiny --subresource=status --type=merge -p \
  '{"status":{"phase":"Running","step":40,"loss":2.25,"trainingPhase":"superposition","workers":{"replicas":1}}}' \
  >/dev/null
K8S_STEP="printer columns of kubectl get rlj"
table=$(kc get rlj)  # (no pipe into head: with pipefail, SIGPIPE fails kubectl)
header=$(sed -n 1p <<<"$table" | tr -s ' ')
[[ $header == "NAME PHASE STEP REWARD RECLAIMED ADMITTED AGE" ]] || fail "$K8S_STEP: header is \"$header\""
row=$(kc get rlj rljob-tiny --no-headers | tr -s ' ')
[[ $row =~ ^rljob-tiny\ Running\ 3\ 0\.5\ 12\.5\ True\ [0-9]+s$ ]] || fail "$K8S_STEP: row is \"$row\""
k8s_say "kubectl get rlj: $header / $row"
K8S_STEP="printer columns of kubectl get tstj"
table=$(kc get tstj)  # (no pipe into head: with pipefail, SIGPIPE fails kubectl)
header=$(sed -n 1p <<<"$table" | tr -s ' ')
[[ $header == "NAME PHASE STEP LOSS TRAINING ADMITTED AGE" ]] || fail "$K8S_STEP: header is \"$header\""
row=$(kc get tstj tst-tiny --no-headers | tr -s ' ')
[[ $row =~ ^tst-tiny\ Running\ 40\ 2\.25\ superposition\ [0-9]+s$ ]] || fail "$K8S_STEP: row is \"$row\""
k8s_say "kubectl get tstj: $header / $row"
K8S_STEP="kubectl get tlt (the category) -A"
all=$(kc get tlt -A -o name | sort | tr '\n' ' ')
[[ $all == "rljob.tlt.dev/bare rljob.tlt.dev/qwen-math-grpo rljob.tlt.dev/rljob-smollm2 rljob.tlt.dev/rljob-smollm2-short-arith rljob.tlt.dev/rljob-tiny tstpretrainjob.tlt.dev/tst-small-kjv tstpretrainjob.tlt.dev/tst-smollm2 tstpretrainjob.tlt.dev/tst-tiny " ]] ||
  fail "$K8S_STEP: got \"$all\""
K8S_STEP="a status write must not change the spec, nor a spec write the status"
[[ $(kc get rljob rljob-tiny -o 'jsonpath={.metadata.generation}') == 1 ]] || fail "$K8S_STEP"

# ---- immutable fields: the model, task and data cannot change under a running job --------------
K8S_STEP="an edit of spec.model.preset must be refused"
out=$(kc patch rljob rljob-tiny --type=merge -p '{"spec":{"model":{"preset":"small"}}}' 2>&1) &&
  fail "$K8S_STEP: it was accepted"
expect_contains "$out" "spec.model" "$K8S_STEP"
expect_contains "$out" "is immutable; delete the job and create it anew to change it" "$K8S_STEP"
K8S_STEP="an edit of spec.data.corpus must be refused"
out=$(kc patch tstj tst-tiny --type=merge -p '{"spec":{"data":{"corpus":"files","paths":["/x"]}}}' 2>&1) &&
  fail "$K8S_STEP: it was accepted"
expect_contains "$out" "is immutable" "$K8S_STEP"
[[ $(kc get rljob rljob-tiny -o 'jsonpath={.spec.model.preset}') == micro ]] ||
  fail "the refused edit changed spec.model.preset"
k8s_say "edits of spec.model and spec.data refused as immutable"

# ---- 5. scale ----------------------------------------------------------------------------------
K8S_STEP="kubectl scale rljob/rljob-tiny --replicas=3"
kc scale rljob/rljob-tiny --replicas=3 >/dev/null
[[ $(kc get rljob rljob-tiny -o 'jsonpath={.spec.roles.rollout.replicas}') == 3 ]] || fail "$K8S_STEP"
scale=$(kc get --raw /apis/tlt.dev/v1alpha1/namespaces/default/rljobs/rljob-tiny/scale)
expect_contains "$scale" '"spec":{"replicas":3}' "the scale subresource"
expect_contains "$scale" '"status":{"replicas":2}' "the scale subresource"
K8S_STEP="kubectl scale rljob/rljob-tiny --replicas=0 (rollout needs at least 1)"
out=$(kc scale rljob/rljob-tiny --replicas=0 2>&1) && fail "$K8S_STEP was accepted"
expect_contains "$out" "spec.roles.rollout.replicas" "$K8S_STEP"
expect_contains "$out" "must be >= 1" "$K8S_STEP"
K8S_STEP="kubectl scale tstj/tst-tiny"
kc scale tstj/tst-tiny --replicas=2 >/dev/null
[[ $(kc get tstj tst-tiny -o 'jsonpath={.spec.workers.replicas}') == 2 ]] || fail "$K8S_STEP"
out=$(kc scale tstj/tst-tiny --replicas=3 2>&1) && fail "scale of tst-tiny to 3 workers (batch 16) was accepted"
expect_contains "$out" "must be divisible by spec.workers.replicas" "scale of tst-tiny to 3 workers"
k8s_say "kubectl scale changed spec.roles.rollout.replicas to 3 and workers to 2; 0 and 3 refused"
k8s_test_finish "CRDs established, $N_EXAMPLES examples accepted, $N_BAD malformed manifests" \
  "refused, printer columns and scale work"
