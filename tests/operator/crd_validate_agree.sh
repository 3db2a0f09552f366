#!/usr/bin/env bash
# One verdict (issue 21): the CRDs on a real kube-apiserver and api::validate (what the operator
# and `tlt validate` run, here through `tlt-operator --check`) accept and refuse the same job
# manifests. tests/operator/validate_cases.py writes ~170 manifests near the edges of the schema
# (quantities, arm names, integer bounds, durations; a seeded random part combines two edges);
# each is sent to the apiserver as a server-side dry run and checked locally; any case where the
# two disagree fails the test, listed with its field and value.
# Usage: crd_validate_agree.sh TLT_OPERATOR_BINARY SOURCE_DIR   (K8S_BIN=DIR, KEEP=1)
set -euo pipefail
op=$1
src=$(cd "$2" && pwd)
source "$src/scripts/k8s-env.sh"

k8s_test_begin crd_validate_agree
K8S_STEP="install the CRDs"
kc apply -f "$src/crds/" >/dev/null
kc wait --for condition=established --timeout=60s crd/rljobs.tlt.dev crd/tstpretrainjobs.tlt.dev \
  >/dev/null
kc create namespace research >/dev/null

K8S_STEP="write the cases"
python3 "$src/tests/operator/validate_cases.py" "$src" "$K8S_TMP/cases" 60 21 >"$K8S_TMP/cases.txt"
n=$(wc -l <"$K8S_TMP/cases.txt")
K8S_STEP="server-side dry run of $n cases"
kc apply --dry-run=server -f "$K8S_TMP/cases" >"$K8S_TMP/apply.out" 2>"$K8S_TMP/apply.err" || true
accepted_by_server() { grep -q "/$1 created (server dry run)" "$K8S_TMP/apply.out"; }
K8S_STEP="compare with tlt-operator --check"
disagree=0 accepted=0
while read -r name what; do
  if accepted_by_server "$name"; then server=accept; else server=refuse; fi
  if "$op" --check "$K8S_TMP/cases/$name.json" >"$K8S_TMP/check.out" 2>&1; then local_=accept; else local_=refuse; fi
  [[ $server == accept ]] && accepted=$((accepted + 1))
  if [[ $server != "$local_" ]]; then
    disagree=$((disagree + 1))
    echo "DISAGREE $name ($what): apiserver ${server}s, api::validate ${local_}s"
    if [[ $server == refuse ]]; then
      grep -m1 "\"$name\"" "$K8S_TMP/apply.err" | cut -c1-300 | sed 's/^/    apiserver: /' || true
    else
      head -n 3 "$K8S_TMP/check.out" | sed 's/^/    api::validate: /'
    fi
  fi
done <"$K8S_TMP/cases.txt"
K8S_STEP="$disagree of $n cases judged differently by the CRD and api::validate"
((disagree == 0)) || exit 1
k8s_test_finish "$n cases, $accepted accepted and $((n - accepted)) refused by both"
