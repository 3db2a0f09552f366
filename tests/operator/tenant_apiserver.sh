#!/usr/bin/env bash
# The operator under a hostile job author and a cluster that refuses its writes (issue 21), on a
# real etcd + kube-apiserver (scripts/k8s-env.sh) with kwok running a fake GPU node, the real
# tlt-operator under tests/operator/rbac.yaml:
#   1. pod policy (the operator at --pod-security=baseline, so that section 3 sees the
#      apiserver's own refusal): user `tenant` may create RLJobs but not pods. Its RLJob whose
#      podTemplate asks for a privileged container, hostNetwork, hostPID, a hostPath of / and
#      another ServiceAccount turns Failed (ForbiddenByPodPolicy), the condition and a Warning
#      Event name each field and control or rule, and no pod, Service or ConfigMap appears. A
#      ServiceAccount the admin listed (--pod-policy-service-account) is allowed: that job's pods
#      run under it. (tests/operator/pod_security_apiserver.sh: the restricted level.)
#   2. Prometheus URLs: a job naming an endpoint not in --prometheus-url-allow is never fetched
#      (RebalancerDegraded, reason PrometheusURLNotAllowed); one that is allowed but answers with a
#      secret body is reported by status code and content type only: the secret appears in no
#      status, Event or operator log line.
#   3. runtime pods pass the `restricted` Pod Security Standard: a job in a namespace enforcing
#      it runs. No silent stall: when that namespace refuses a podTemplate's runAsUser 0, with a
#      foreign pod squatting a pod's name, and with an unknown podTemplate field, the job's phase
#      turns Blocked, its Created condition carries the apiserver's reason (Forbidden,
#      AlreadyExists, BadRequest) and message, one Warning Event of that reason is recorded, the
#      retries back off, and the squatter is neither adopted nor changed; once it goes, the job
#      runs.
#   4. an RLJob and a TSTPretrainJob of the same name both run, each with its own Service and
#      ConfigMap (<name>-rl, <name>-tst).
# Stops every process it started (by PID) on exit, also on failure. Last line: PASS or FAIL.
# Usage: tenant_apiserver.sh TLT_OPERATOR_BINARY SOURCE_DIR   (K8S_BIN=DIR, KEEP=1)
set -euo pipefail
op=$1
src=$(cd "$2" && pwd)
source "$src/scripts/k8s-env.sh"

k8s_test_begin tenant_apiserver kwok
k8s_start_gpu_node
k8s_install_operator

# ---- two loopback HTTP endpoints answering a secret (what an internal endpoint would hold) ------
SECRET="tlt-secret-$RANDOM$RANDOM"
cat >"$K8S_TMP/endpoint.py" <<'PY'
import http.server, sys
secret, port_file, hits = sys.argv[1:4]
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open(hits, "a") as f:
            f.write(self.path + "\n")
        data = ("internal data: " + secret + "\n").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def log_message(self, *args):
        pass
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(port_file + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
import os
os.rename(port_file + ".tmp", port_file)
srv.serve_forever()
PY
for e in internal allowed; do
  : >"$K8S_TMP/$e.hits"
  k8s_start "$e" "$K8S_TMP/$e.log" python3 "$K8S_TMP/endpoint.py" "$SECRET" "$K8S_TMP/$e.port" \
    "$K8S_TMP/$e.hits"
done
K8S_STEP="start the endpoints"
wait_until 10 "the endpoints wrote no port" test -s "$K8S_TMP/allowed.port"
wait_until 10 "the endpoints wrote no port" test -s "$K8S_TMP/internal.port"
INTERNAL=http://127.0.0.1:$(cat "$K8S_TMP/internal.port")
ALLOWED=http://127.0.0.1:$(cat "$K8S_TMP/allowed.port")
curl -fsS "$INTERNAL/x" | grep -q "$SECRET" || fail "the internal endpoint does not answer"
: >"$K8S_TMP/internal.hits"

kc create serviceaccount trainer-reader -n research >/dev/null
k8s_test_operator "$op" --watch-timeout 20 --prometheus-timeout 2 \
  --prometheus-url-allow "$ALLOWED" --pod-policy-service-account trainer-reader \
  --pod-security baseline

# ---- 1. the pod policy ---------------------------------------------------------------------------
K8S_STEP="RBAC of the tenant"
kc create role job-author -n research --verb=create,get,list,watch,delete \
  --resource=rljobs.tlt.dev,tstpretrainjobs.tlt.dev >/dev/null
kc create rolebinding job-author -n research --role=job-author --user=tenant >/dev/null
[[ $(kc auth can-i create rljobs.tlt.dev -n research --as tenant) == yes ]] || fail "tenant cannot create RLJobs"
[[ $(kc auth can-i create pods -n research --as tenant || true) == no ]] || fail "tenant may create pods"
K8S_STEP="a hostile RLJob"
kc --as tenant apply -f - >/dev/null <<'YAML'
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata: {name: escape, namespace: research}
spec:
  roles:
    rollout:
      replicas: 1
      podTemplate:
        spec:
          hostNetwork: true
          hostPID: true
          serviceAccountName: tlt-operator
          containers:
            - name: tlt
              securityContext: {privileged: true}
          volumes:
            - name: root
              hostPath: {path: /}
    trainer: {replicas: 1}
YAML
wait_until 30 "the hostile RLJob did not turn Failed" phase_is rljob/escape Failed
reason=$(cond rljob/escape Failed reason)
[[ $reason == ForbiddenByPodPolicy ]] || fail "Failed reason $reason, want ForbiddenByPodPolicy"
message=$(cond rljob/escape Failed message)
for needle in "spec.roles.rollout.podTemplate.spec.hostNetwork" 'control "Host Namespaces"' \
  "spec.roles.rollout.podTemplate.spec.hostPID" \
  "spec.roles.rollout.podTemplate.spec.containers[0].securityContext.privileged" \
  'control "Privileged Containers"' \
  "spec.roles.rollout.podTemplate.spec.volumes[0].hostPath" 'control "HostPath Volumes"' \
  "spec.roles.rollout.podTemplate.spec.serviceAccountName" "rule serviceAccount"; do
  [[ $message == *"$needle"* ]] || fail "the Failed condition does not name $needle: $message"
done
wait_until 30 "no Warning Event ForbiddenByPodPolicy" has_event escape ForbiddenByPodPolicy
events escape ForbiddenByPodPolicy | grep -q '^Warning: .*hostPath.*HostPath Volumes' ||
  fail "the Event does not name hostPath: $(events escape ForbiddenByPodPolicy)"
sleep 2  # anything the operator would create shows up by now
[[ -z $(owned escape) ]] || fail "the refused job got children: $(owned escape)"
k8s_say "tenant's privileged/hostNetwork/hostPID/hostPath/foreign-SA RLJob: Failed, ForbiddenByPodPolicy, no pod"

K8S_STEP="a ServiceAccount the admin allows"
kc --as tenant apply -f - >/dev/null <<'YAML'
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata: {name: reader, namespace: research}
spec:
  roles:
    rollout: {replicas: 1, podTemplate: {spec: {serviceAccountName: trainer-reader}}}
    trainer: {replicas: 1}
YAML
wait_until 60 "the RLJob with an allowed ServiceAccount did not turn Running" phase_is rljob/reader Running
[[ $(kc get pod reader-rollout-0 -n research -o 'jsonpath={.spec.serviceAccountName}') == trainer-reader ]] ||
  fail "reader-rollout-0 does not run as trainer-reader"
k8s_say "serviceAccountName trainer-reader (listed by the admin): Running"

# ---- 2. Prometheus URLs ----------------------------------------------------------------------------
rebalancing_job() {  # NAME URL
  kc apply -f - >/dev/null <<YAML
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata: {name: $1, namespace: research}
spec:
  roles: {rollout: {replicas: 1}, trainer: {replicas: 1}}
  rebalancing:
    enabled: true
    window: 10s
    interval: 2s
    metric: tlt_gpu_busy_ratio
    podLabel: pod
    prometheusURL: $2
YAML
}
K8S_STEP="a job naming an endpoint not allowed"
rebalancing_job peek "$INTERNAL/api"
degraded_because() { [[ $(cond "rljob/$1" RebalancerDegraded reason) == "$2" ]]; }
wait_until 60 "peek is not RebalancerDegraded PrometheusURLNotAllowed" degraded_because peek PrometheusURLNotAllowed
[[ ! -s $K8S_TMP/internal.hits ]] || fail "the operator fetched a URL not allowed: $(cat "$K8S_TMP/internal.hits")"
K8S_STEP="a job naming an allowed endpoint that answers a secret"
rebalancing_job peek2 "$ALLOWED"
wait_until 60 "peek2 is not RebalancerDegraded PrometheusQueryFailed" degraded_because peek2 PrometheusQueryFailed
[[ -s $K8S_TMP/allowed.hits ]] || fail "the allowed endpoint was never queried"
message=$(cond rljob/peek2 RebalancerDegraded message)
[[ $message == *"HTTP 200 (text/plain)"* ]] || fail "the message does not give code and content type: $message"
sleep 3  # a few more queries
for where in "status:$(kc get rljobs -n research -o json)" \
  "events:$(kc get events -n research -o json)" "log:$(cat "$K8S_TMP/operator.log")"; do
  [[ $where != *"$SECRET"* ]] || fail "the endpoint's answer leaked into ${where%%:*}"
done
k8s_say "URL not allowed: never fetched; allowed URL answering a secret: \"$message\", secret nowhere"
kc delete rljob peek peek2 escape reader -n research --wait=true --timeout=60s >/dev/null

# ---- 3. no silent stall --------------------------------------------------------------------------
K8S_STEP="a namespace enforcing the restricted Pod Security Standard"
kc create namespace strict >/dev/null
kc create serviceaccount default -n strict >/dev/null
kc label namespace strict pod-security.kubernetes.io/enforce=restricted >/dev/null
kc apply -f - >/dev/null <<'YAML'
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata: {name: compliant, namespace: strict}
spec:
  roles: {rollout: {replicas: 2}, trainer: {replicas: 1}}
YAML
wait_until 60 "the RLJob in the restricted namespace did not turn Running" phase_is rljob/compliant Running strict
got=$(kc get pod compliant-trainer-0 -n strict -o 'jsonpath={.spec.securityContext.runAsNonRoot} {.spec.securityContext.runAsUser} {.spec.securityContext.seccompProfile.type} {.spec.containers[0].securityContext.allowPrivilegeEscalation} {.spec.containers[0].securityContext.capabilities.drop} {.spec.containers[0].securityContext.readOnlyRootFilesystem}')
[[ $got == 'true 65532 RuntimeDefault false ["ALL"] true' ]] || fail "the pod's security context: $got"
kc delete rljob compliant -n strict --wait=true --timeout=60s >/dev/null
k8s_say "restricted Pod Security Standard: the job's pods admitted (non-root 65532, seccomp, no privilege, drop ALL, read-only root)"

K8S_STEP="a podTemplate the restricted namespace refuses (runAsUser 0)"
kc apply -f - >/dev/null <<'YAML'
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata: {name: rooted, namespace: strict}
spec:
  roles:
    rollout: {replicas: 1, podTemplate: {spec: {securityContext: {runAsUser: 0}}}}
    trainer: {replicas: 1}
YAML
blocked_because() {  # OBJECT REASON [NAMESPACE]
  phase_is "$1" Blocked "${3:-research}" && [[ $(cond "$1" Created reason "${3:-research}") == "$2" ]]
}
wait_until 60 "rooted is not Blocked by Forbidden" blocked_because rljob/rooted Forbidden strict
[[ $(cond rljob/rooted Created message strict) == *"violates PodSecurity"* ]] ||
  fail "the Created condition does not give the apiserver's message: $(cond rljob/rooted Created message strict)"
wait_until 30 "no Warning Event Forbidden" has_event rooted Forbidden strict
kc get rljob rooted -n strict --no-headers | awk '{ print $2 }' | grep -qx Blocked ||
  fail "kubectl get rljob does not show Blocked: $(kc get rljob rooted -n strict --no-headers)"
errors() {
  curl -sf "http://127.0.0.1:$METRICS_PORT/metrics" |
    awk '/^tlt_operator_reconcile_total\{kind="RLJob",result="error"\}/ { print $2 }'
}
e0=$(errors)
sleep 10
e1=$(errors)
tries=$(python3 -c "print(int(float('${e1:-0}') - float('${e0:-0}')))")
((tries <= 8)) || fail "the refused job was retried $tries times in 10 s: no backoff"
[[ $(events rooted Forbidden strict | wc -l) -eq 1 ]] || fail "not one Event: $(events rooted Forbidden strict)"
k8s_say "restricted namespace refusing runAsUser 0: Blocked, reason Forbidden, one Warning Event, $tries retries in 10 s"

K8S_STEP="a foreign pod holding a pod's name"
kc run squat-trainer-0 -n research --image registry.invalid/other:1 --restart=Never \
  --labels app=theirs >/dev/null
kc apply -f - >/dev/null <<'YAML'
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata: {name: squat, namespace: research}
spec:
  roles: {rollout: {replicas: 1}, trainer: {replicas: 1}}
YAML
wait_until 60 "squat is not Blocked by AlreadyExists" blocked_because rljob/squat AlreadyExists
wait_until 30 "no Warning Event AlreadyExists" has_event squat AlreadyExists
got=$(kc get pod squat-trainer-0 -n research -o 'jsonpath={.metadata.labels} {.metadata.ownerReferences} {.spec.containers[0].image}')
[[ $got == '{"app":"theirs"}  registry.invalid/other:1' ]] || fail "the foreign pod was changed: $got"
kc delete pod squat-trainer-0 -n research --wait=true --timeout=60s >/dev/null
wait_until 90 "squat did not run once the foreign pod went" phase_is rljob/squat Running
[[ $(cond rljob/squat Created status) == True ]] || fail "Created is not True after the squatter went"
k8s_say "a squatted pod name: Blocked (AlreadyExists), the squatter untouched; gone -> Running"

K8S_STEP="an unknown podTemplate field"
kc apply -f - >/dev/null <<'YAML'
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata: {name: typo, namespace: research}
spec:
  roles:
    rollout: {replicas: 1, podTemplate: {spec: {nodeSelectorr: {disk: ssd}}}}
    trainer: {replicas: 1}
YAML
wait_until 60 "typo is not Blocked by BadRequest" blocked_because rljob/typo BadRequest
[[ $(cond rljob/typo Created message) == *nodeSelectorr* ]] ||
  fail "the message does not name the field: $(cond rljob/typo Created message)"
k8s_say "an unknown podTemplate field: Blocked (BadRequest) naming nodeSelectorr"
kc delete rljob typo squat -n research --wait=true --timeout=60s >/dev/null
kc delete rljob rooted -n strict --wait=true --timeout=60s >/dev/null

# ---- 4. an RLJob and a TSTPretrainJob of one name --------------------------------------------------
K8S_STEP="an RLJob and a TSTPretrainJob named twin"
kc apply -f - >/dev/null <<'YAML'
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata: {name: twin, namespace: research}
spec:
  roles: {rollout: {replicas: 2}, trainer: {replicas: 1}}
---
apiVersion: tlt.dev/v1alpha1
kind: TSTPretrainJob
metadata: {name: twin, namespace: research}
spec:
  workers: {replicas: 2}
YAML
wait_until 60 "the RLJob twin did not turn Running" phase_is rljob/twin Running
wait_until 60 "the TSTPretrainJob twin did not turn Running" phase_is tstj/twin Running
for k in rl:RLJob tst:TSTPretrainJob; do
  s=${k%%:*} kind=${k#*:}
  kc get configmap "twin-$s-spec" -n research -o 'jsonpath={.data.job\.json}' | grep -q "\"kind\": \"$kind\"" ||
    fail "ConfigMap twin-$s-spec does not hold the $kind"
  [[ $(kc get service "twin-$s" -n research -o 'jsonpath={.spec.selector.tlt\.dev/kind}') == "$kind" ]] ||
    fail "Service twin-$s does not select the $kind's pods"
done
pods=$(kc get pods -n research -l tlt.dev/job=twin -o name | sort | paste -sd' ')
[[ $pods == "pod/twin-rollout-0 pod/twin-rollout-1 pod/twin-trainer-0 pod/twin-workers-0 pod/twin-workers-1" ]] ||
  fail "the twins' pods: $pods"
kc delete rljob twin -n research --wait=true --timeout=60s >/dev/null
phase_is tstj/twin Running || fail "deleting the RLJob twin disturbed the TSTPretrainJob"
kc get service twin-tst -n research >/dev/null || fail "deleting the RLJob twin took the TSTPretrainJob's Service"
k8s_say "RLJob and TSTPretrainJob named twin: both Running, Services twin-rl/twin-tst, ConfigMaps each"
k8s_test_finish "pod policy, Prometheus allow-list and no body, restricted PSS, Blocked on" \
  "Forbidden/AlreadyExists/BadRequest, kinds sharing a name"
