#!/usr/bin/env bash
# One verdict on pod security (issue 41): the operator's Pod Security Standards
# (operator/controller/pod_security.h, through `tlt-operator --check-pod-security LEVEL`) and Pod
# Security Admission on a real kube-apiserver admit and refuse the same pods, at every level.
# tests/operator/pss_cases.py writes seeded pods (valid for the apiserver, mixing the fields of
# every control); each is created as a server-side dry run in namespaces labelled
# pod-security.kubernetes.io/enforce=privileged|baseline|restricted (enforce-version=latest).
# Pods the apiserver refuses for another reason than PodSecurity (its own validation) are left
# out and counted; at least 500 must remain per level. Any pod judged differently fails the test,
# printed with both verdicts.
# Usage: pss_differential.sh TLT_OPERATOR_BINARY SOURCE_DIR [COUNT SEED]   (K8S_BIN=DIR, KEEP=1)
set -euo pipefail
op=$1
src=$(cd "$2" && pwd)
count=${3:-700}
seed=${4:-41}
source "$src/scripts/k8s-env.sh"

k8s_test_begin pss_differential
levels=(privileged baseline restricted)
K8S_STEP="namespaces enforcing each level"
for level in "${levels[@]}"; do
  kc create namespace "pss-$level" >/dev/null
  kc label namespace "pss-$level" "pod-security.kubernetes.io/enforce=$level" \
    pod-security.kubernetes.io/enforce-version=latest >/dev/null
  kc create serviceaccount default -n "pss-$level" >/dev/null  # no controller-manager runs
done

K8S_STEP="write the pods"
python3 "$src/tests/operator/pss_cases.py" "$count" "$seed" >"$K8S_TMP/pods.jsonl"
K8S_STEP="server-side dry run of $count pods per level"
pids=()
for level in "${levels[@]}"; do
  python3 -c '
import json, sys
items = [json.loads(l) for l in open(sys.argv[1])]
for p in items:
    p["metadata"]["namespace"] = sys.argv[2]
json.dump({"apiVersion": "v1", "kind": "List", "items": items}, open(sys.argv[3], "w"))
' "$K8S_TMP/pods.jsonl" "pss-$level" "$K8S_TMP/list-$level.json"
  kc create --dry-run=server -o name -f "$K8S_TMP/list-$level.json" \
    >"$K8S_TMP/server-$level.out" 2>"$K8S_TMP/server-$level.err" &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid" || true; done  # refusals make kubectl exit 1
K8S_STEP="tlt-operator --check-pod-security"
for level in "${levels[@]}"; do
  "$op" --check-pod-security "$level" <"$K8S_TMP/pods.jsonl" >"$K8S_TMP/operator-$level.out"
done

K8S_STEP="compare the verdicts"
RESULT=$(python3 - "$K8S_TMP" "${levels[@]}" <<'PY'
import json, re, sys
tmp, levels = sys.argv[1], sys.argv[2:]
pods = [json.loads(l) for l in open(tmp + "/pods.jsonl")]
names = [p["metadata"]["name"] for p in pods]
bad, summary = 0, []
for level in levels:
    admitted = {l.strip().split("/", 1)[1] for l in open("%s/server-%s.out" % (tmp, level)) if "/" in l}
    refused, invalid = {}, {}
    for line in open("%s/server-%s.err" % (tmp, level)):
        m = re.search(r'[Pp]ods? "([^"]+)" is (forbidden|invalid)', line)
        if not m:
            continue
        (refused if "violates PodSecurity" in line else invalid)[m.group(1)] = line.strip()[:400]
    ours = [l.rstrip("\n").split("\t", 1) for l in open("%s/operator-%s.out" % (tmp, level))]
    assert len(ours) == len(pods), "the operator judged %d of %d pods" % (len(ours), len(pods))
    judged = allowed = 0
    for name, pod, verdict in zip(names, pods, ours):
        if name in invalid:
            continue
        if name in admitted:
            server = "allow"
        elif name in refused:
            server = "deny"
        else:
            print("NO VERDICT from the apiserver for %s at %s" % (name, level), file=sys.stderr)
            bad += 1
            continue
        judged += 1
        allowed += server == "allow"
        if server != verdict[0]:
            bad += 1
            print("DISAGREE %s at %s: Pod Security Admission %ss, the operator %ss" % (
                name, level, server, verdict[0]), file=sys.stderr)
            print("    pod: " + json.dumps(pod, sort_keys=True), file=sys.stderr)
            print("    apiserver: " + refused.get(name, "admitted"), file=sys.stderr)
            print("    operator: " + (verdict[1] if len(verdict) > 1 else "allow"), file=sys.stderr)
    if judged < 500:
        print("only %d pods judged at %s (%d invalid for the apiserver, e.g. %s)" % (
            judged, level, len(invalid), next(iter(invalid.values()), "")), file=sys.stderr)
        bad += 1
    summary.append("%s: %d pods, %d admitted, %d refused by both (%d invalid, left out)" % (
        level, judged, allowed, judged - allowed, len(invalid)))
print("; ".join(summary))
sys.exit(1 if bad else 0)
PY
) || { K8S_STEP="the operator and Pod Security Admission disagree (above)"; exit 1; }
k8s_test_finish "$RESULT"
