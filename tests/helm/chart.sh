#!/usr/bin/env bash
# The Helm chart helm/tlt, offline and on a real etcd + kube-apiserver (scripts/k8s-env.sh):
#   1. helm/tlt/crds/ and helm/tlt/dashboards/ hold exactly crds/ and dashboards/*.json (they
#      are links to them; Helm follows links and packages the files); appVersion is
#      `tlt-operator --version`;
#   2. `helm lint --strict` and `helm template` with the default values, with
#      tests/helm/values-full.yaml (everything on) and with a watch namespace (Roles only, no
#      ClusterRole); check_render.py checks the rendered objects
#      (security context, probes, flags the real tlt-operator accepts, selectors, honorLabels,
#      dashboards, each job's NetworkPolicy flags);
#   3. the three renderings, CRDs included, pass `kubectl apply --dry-run=server` (strict field
#      validation) on the apiserver, with stand-in ServiceMonitor/PodMonitor CRDs
#      (tests/helm/monitoring-crds.yaml);
#   4. `helm install` with the full values; `kubectl auth can-i` as the operator's
#      ServiceAccount: every verb of tests/operator/rbac.yaml (the RBAC the real operator runs
#      with in tests/operator/controller_apiserver.sh) is allowed, and a list of others denied;
#   5. `helm upgrade` (dashboards and monitors off, one replica) removes what it should;
#      `helm uninstall` removes the release and keeps the CRDs;
#   6. misconfigurations fail at render time with a message.
# Stops every process it started (by PID) on exit, also on failure. Last line: PASS or FAIL.
# Usage: chart.sh TLT_OPERATOR_BINARY SOURCE_DIR     (K8S_BIN=DIR, KEEP=1 as k8s-env.sh)
set -euo pipefail
op=$1
src=$(cd "$2" && pwd)
chart=$src/helm/tlt
here=$src/tests/helm
source "$src/scripts/k8s-env.sh"

k8s_test_begin "helm chart" helm
N_ALLOWED=0
N_DENIED=0
# Helm's own cache and config in the temp dir, not in $HOME.
export HELM_CACHE_HOME=$K8S_TMP/helm/cache HELM_CONFIG_HOME=$K8S_TMP/helm/config
export HELM_DATA_HOME=$K8S_TMP/helm/data
hm() { "$K8S_BIN/helm" --kubeconfig "$KUBECONFIG" "$@"; }
NS=tlt-system
FULL=$here/values-full.yaml

# ---- 1. copies and versions ---------------------------------------------------------------------
K8S_STEP="helm/tlt/crds/ must hold exactly crds/ (fix: ln -sfn ../../crds helm/tlt/crds)"
diff -r "$src/crds" "$chart/crds" >/dev/null || { diff -rq "$src/crds" "$chart/crds" || true; exit 1; }
K8S_STEP="helm/tlt/dashboards/ must hold exactly dashboards/*.json (fix: ln -sfn ../../dashboards helm/tlt/dashboards)"
for f in "$src"/dashboards/*.json "$chart"/dashboards/*.json; do
  cmp -s "$src/dashboards/$(basename "$f")" "$chart/dashboards/$(basename "$f")" || fail "$K8S_STEP: $(basename "$f")"
done
K8S_STEP="Chart.yaml appVersion must be the version tlt-operator prints"
app_version=$(sed -n 's/^appVersion: "\(.*\)"$/\1/p' "$chart/Chart.yaml")
[[ $("$op" --version) == "tlt-operator $app_version" ]] ||
  fail "$K8S_STEP (appVersion $app_version, tlt-operator --version: $("$op" --version))"
"$op" --help >"$K8S_TMP/operator-help.txt"
k8s_say "chart's crds/ and dashboards/ are the repository's; appVersion $app_version = tlt-operator --version"

# ---- 2. lint and template ----------------------------------------------------------------------
K8S_STEP="helm lint --strict (default values)"
hm lint --strict "$chart" >"$K8S_TMP/lint.log" 2>&1 || { cat "$K8S_TMP/lint.log"; exit 1; }
K8S_STEP="helm lint --strict -f values-full.yaml"
hm lint --strict "$chart" -f "$FULL" >"$K8S_TMP/lint.log" 2>&1 || { cat "$K8S_TMP/lint.log"; exit 1; }
for mode in default full namespaced; do
  args=()
  [[ $mode == full ]] && args=(-f "$FULL")
  [[ $mode == namespaced ]] && args=(--set operator.watchNamespace=research
    --set networkPolicy.enabled=false)
  K8S_STEP="helm template ($mode values)"
  hm template tlt "$chart" -n "$NS" "${args[@]}" >"$K8S_TMP/$mode.yaml"
  hm template tlt "$chart" -n "$NS" "${args[@]}" --include-crds >"$K8S_TMP/$mode-crds.yaml"
  K8S_STEP="the objects rendered with the $mode values (see the FAIL lines above)"
  python3 "$here/check_render.py" "$mode" "$K8S_TMP/$mode.yaml" "$K8S_TMP/operator-help.txt" "$src"
done
k8s_say "helm lint --strict clean; the three renderings pass check_render.py"

# ---- 3. server-side dry run ---------------------------------------------------------------------
K8S_STEP="stand-in monitoring.coreos.com CRDs"
kc apply -f "$here/monitoring-crds.yaml" >/dev/null
kc wait --for condition=established --timeout=60s crd/servicemonitors.monitoring.coreos.com \
  crd/podmonitors.monitoring.coreos.com >/dev/null
K8S_STEP="stand-in kueue.x-k8s.io CRDs (the kinds the Kueue role names)"
kc apply -f "$here/kueue-crds.yaml" >/dev/null
kc wait --for condition=established --timeout=60s crd/workloads.kueue.x-k8s.io \
  crd/resourceflavors.kueue.x-k8s.io crd/workloadpriorityclasses.kueue.x-k8s.io >/dev/null
for n in "$NS" monitoring research; do kc create namespace "$n" >/dev/null; done
for mode in default full namespaced; do
  K8S_STEP="kubectl apply --dry-run=server of the $mode rendering (CRDs included)"
  # The CRDs first (a dry run creates nothing, so their kinds are unknown otherwise).
  kc apply --dry-run=server -f "$chart/crds/" >/dev/null
  out=$(kc apply --dry-run=server -f "$K8S_TMP/$mode-crds.yaml" 2>&1) || { echo "$out"; exit 1; }
  k8s_say "$mode: $(grep -c 'server dry run' <<<"$out") objects accepted by the apiserver (dry run)"
done

# ---- 4. install and RBAC ------------------------------------------------------------------------
K8S_STEP="helm install -f values-full.yaml"
hm install tlt "$chart" -n "$NS" -f "$FULL" >"$K8S_TMP/install.log" 2>&1 ||
  { cat "$K8S_TMP/install.log"; exit 1; }
grep -q 'Grafana: 5 dashboards' "$K8S_TMP/install.log" ||
  { cat "$K8S_TMP/install.log"; fail "helm install printed no NOTES about the 5 dashboards"; }
K8S_STEP="the CRDs from the chart did not become Established"
kc wait --for condition=established --timeout=60s crd/rljobs.tlt.dev crd/tstpretrainjobs.tlt.dev \
  >/dev/null
K8S_STEP="objects after helm install"
[[ $(kc get configmap -n monitoring -l grafana_dashboard=1 -o name | wc -l) == 5 ]] ||
  fail "$K8S_STEP: not 5 dashboard ConfigMaps labelled grafana_dashboard=1 in monitoring"
kc get -n "$NS" deployment/tlt-tlt-full-operator serviceaccount/tlt-operator-sa \
  service/tlt-tlt-full-operator-metrics role/tlt-tlt-full-operator-leader-election >/dev/null
kc get -n monitoring servicemonitor/tlt-tlt-full-operator podmonitor/tlt-tlt-full-jobs >/dev/null
k8s_say "helm install: operator objects, monitors and 5 dashboard ConfigMaps created"

SA=system:serviceaccount:$NS:tlt-operator-sa
# can_i VERB RESOURCE[/SUBRESOURCE] [NAMESPACE|-A]: kubectl auth can-i as the operator's
# ServiceAccount (RESOURCE/NAME would name an object, so a subresource goes to --subresource).
can_i() {
  local args=("$1" "${2%%/*}") ns=${3:-research}
  [[ $2 == */* ]] && args+=(--subresource "${2#*/}")
  if [[ $ns == -A ]]; then args+=(-A); else args+=(-n "$ns"); fi
  kc auth can-i --as="$SA" "${args[@]}" 2>/dev/null || true
}
can() {  # the operator needs it
  K8S_STEP="the operator's ServiceAccount may not $1 $2 (${3:-research}); it needs to"
  [[ $(can_i "$@") == yes ]] || exit 1
  N_ALLOWED=$((N_ALLOWED + 1))
}
cannot() {  # least privilege: it must not
  K8S_STEP="the operator's ServiceAccount may $1 $2 (${3:-research}); least privilege says no"
  [[ $(can_i "$@") == no ]] || exit 1
  N_DENIED=$((N_DENIED + 1))
}
# Allowed: every rule of tests/operator/rbac.yaml (what the real operator runs with), as
# "ROLE-KIND VERB RESOURCE[.GROUP][/SUBRESOURCE]" lines.
K8S_STEP="reading tests/operator/rbac.yaml"
needed=$(python3 - "$src/tests/operator/rbac.yaml" <<'PY'
import sys, yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
    if not d or d["kind"] not in ("ClusterRole", "Role"):
        continue
    for rule in d["rules"]:
        for g in rule["apiGroups"]:
            for r in rule["resources"]:
                res, _, sub = r.partition("/")
                name = res + ("." + g if g else "") + ("/" + sub if sub else "")
                for v in rule["verbs"]:
                    print(d["kind"], v, name)
PY
)
[[ -n $needed ]] || fail "$K8S_STEP: no rules"
while read -r kind verb res; do
  if [[ $kind == Role ]]; then
    can "$verb" "$res" "$NS"
    cannot "$verb" "$res" research   # the Lease only in the release namespace
  else
    can "$verb" "$res" research
    [[ $verb == list || $verb == watch ]] && can "$verb" "$res" -A
  fi
done <<<"$needed"
# The chart binds nothing to a namespace's default ServiceAccount: there, job pods (and every
# other pod) get nothing from it (each job's own identity is the operator's: job_identity.sh).
JOB_SA=system:serviceaccount:research:default
for denied in "get pods -n research" "list pods -n research" "patch pods -n research" \
  "get secrets -n research" "create pods -n research"; do
  K8S_STEP="research's default ServiceAccount may $denied; the chart must bind nothing to it"
  # shellcheck disable=SC2086
  [[ $(kc auth can-i $denied --as "$JOB_SA" 2>/dev/null || true) == no ]] || exit 1
done
cannot escalate roles.rbac.authorization.k8s.io
cannot bind roles.rbac.authorization.k8s.io
cannot create serviceaccounts/token

# Denied: what the operator never calls.
cannot create rljobs.tlt.dev
cannot update rljobs.tlt.dev
cannot deletecollection tstpretrainjobs.tlt.dev
cannot update rljobs.tlt.dev/scale
cannot deletecollection pods
cannot list endpoints -A
cannot update configmaps
cannot delete events
cannot update leases.coordination.k8s.io "$NS"
cannot delete leases.coordination.k8s.io "$NS"
cannot update secrets
cannot deletecollection secrets
cannot update networkpolicies.networking.k8s.io
cannot get pods/log
cannot create pods/exec
cannot list nodes
cannot create deployments.apps
cannot update customresourcedefinitions.apiextensions.k8s.io
cannot create clusterrolebindings.rbac.authorization.k8s.io
k8s_say "RBAC of $SA: $N_ALLOWED needed verbs allowed, $N_DENIED others denied"

# ---- 5. upgrade and uninstall ------------------------------------------------------------------
K8S_STEP="helm upgrade (dashboards and monitors off, 1 replica)"
hm upgrade tlt "$chart" -n "$NS" -f "$FULL" --set dashboards.enabled=false \
  --set serviceMonitor.enabled=false --set podMonitor.enabled=false --set replicaCount=1 \
  >"$K8S_TMP/upgrade.log" 2>&1 || { cat "$K8S_TMP/upgrade.log"; exit 1; }
[[ $(kc get deployment -n "$NS" tlt-tlt-full-operator -o 'jsonpath={.spec.replicas}') == 1 ]] ||
  fail "$K8S_STEP: replicas not 1"
[[ -z $(kc get configmap -n monitoring -l grafana_dashboard=1 -o name) ]] ||
  fail "$K8S_STEP: dashboard ConfigMaps still there"
[[ -z $(kc get servicemonitors,podmonitors -n monitoring -o name) ]] ||
  fail "$K8S_STEP: monitors still there"
[[ $(hm status tlt -n "$NS" -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])') == 2 ]] ||
  fail "$K8S_STEP: release is not at revision 2"
K8S_STEP="helm uninstall"
hm uninstall tlt -n "$NS" >/dev/null
[[ -z $(kc get deployments,services,serviceaccounts,roles,rolebindings -n "$NS" -l app.kubernetes.io/instance=tlt -o name) ]] ||
  fail "$K8S_STEP left namespaced objects"
[[ -z $(kc get clusterroles,clusterrolebindings -l app.kubernetes.io/instance=tlt -o name) ]] ||
  fail "$K8S_STEP left the ClusterRole or its binding"
kc get crd rljobs.tlt.dev tstpretrainjobs.tlt.dev >/dev/null ||
  fail "$K8S_STEP removed the CRDs (Helm keeps crds/ on uninstall; jobs would be lost)"
k8s_say "helm upgrade removed dashboards and monitors; helm uninstall removed the release, kept the CRDs"

# ---- 6. misconfigurations -------------------------------------------------------------------------
K8S_STEP="serviceAccount.create=false without a name must fail to render"
out=$(hm template tlt "$chart" --set serviceAccount.create=false 2>&1) && fail "$K8S_STEP"
[[ $out == *"serviceAccount.name must name an existing ServiceAccount"* ]] || { echo "$out"; fail "$K8S_STEP"; }
K8S_STEP="a Kubernetes older than the CRDs' CEL rules need must be refused"
out=$(hm template tlt "$chart" --kube-version 1.29.0 2>&1) && fail "$K8S_STEP"
[[ $out == *"kubeVersion"* || $out == *"incompatible"* ]] || { echo "$out"; fail "$K8S_STEP"; }
k8s_test_finish "lint, template, server-side dry run, install, $N_ALLOWED allowed and $N_DENIED" \
  "denied verbs, upgrade, uninstall"
