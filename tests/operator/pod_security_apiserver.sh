#!/usr/bin/env bash
# The operator holds job authors to the Pod Security Standards and its admin rules (issue 41), on a
# real etcd + kube-apiserver (scripts/k8s-env.sh) with the real tlt-operator at its default
# level (restricted) under tests/operator/rbac.yaml. User `tenant` may create RLJobs, not pods:
#   1. RLJob `escape`, whose rollout podTemplate holds the escapes issue 41 lists (a pod-level
#      windowsOptions.hostProcess, an init container with allowPrivilegeEscalation, runAsUser 0,
#      procMount Unmasked and seccomp Unconfined, a sidecar with a hostPort, an SELinux type and
#      AppArmor Unconfined, an unsafe sysctl, an nfs volume), turns Failed (ForbiddenByPodPolicy);
#      the condition names every field and its control; no pod, Service or ConfigMap appears;
#   2. RLJob `nobody`, whose podTemplate sets serviceAccountName "" (the namespace's default
#      ServiceAccount), and `sticky`, whose template carries metadata.finalizers: Failed
#      (ForbiddenByPodPolicy), the field and rule named, no pod;
#   3. RLJob `plain` (no podTemplate) gets its pods: the operator's own pods meet restricted.
# Stops every process it started (by PID) on exit, also on failure. Last line: PASS or FAIL.
# Usage: pod_security_apiserver.sh TLT_OPERATOR_BINARY SOURCE_DIR   (K8S_BIN=DIR, KEEP=1)
set -euo pipefail
op=$1
src=$(cd "$2" && pwd)
source "$src/scripts/k8s-env.sh"

k8s_test_begin pod_security_apiserver
k8s_test_operator "$op" --watch-timeout 20

K8S_STEP="RBAC of the tenant"
kc create role job-author -n research --verb=create,get,list,watch,delete \
  --resource=rljobs.tlt.dev,tstpretrainjobs.tlt.dev >/dev/null
kc create rolebinding job-author -n research --role=job-author --user=tenant >/dev/null

# refused JOB NEEDLE...: JOB turns Failed (ForbiddenByPodPolicy), its condition holds every
# NEEDLE, a Warning Event is recorded, and it has no children.
refused() {
  local job=$1 needle message
  shift
  K8S_STEP="RLJob $job"
  wait_until 30 "$job did not turn Failed" phase_is "rljob/$job" Failed
  [[ $(cond "rljob/$job" Failed reason) == ForbiddenByPodPolicy ]] ||
    fail "$job: Failed reason $(cond "rljob/$job" Failed reason), want ForbiddenByPodPolicy"
  message=$(cond "rljob/$job" Failed message)
  for needle in "$@"; do
    [[ $message == *"$needle"* ]] || fail "$job: the condition does not name '$needle': $message"
  done
  wait_until 30 "$job: no Warning Event ForbiddenByPodPolicy" has_event "$job" ForbiddenByPodPolicy
  sleep 1  # anything the operator would create shows up by now
  [[ -z $(owned "$job") ]] || fail "the refused job $job got children: $(owned "$job")"
  k8s_say "$job: Failed (ForbiddenByPodPolicy), the condition naming each field and control or rule, no children"
}

# ---- 1. the escapes of issue 41 -------------------------------------------------------------------
K8S_STEP="a tenant's RLJob with PSS escapes"
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
          securityContext:
            windowsOptions: {hostProcess: true}
            sysctls: [{name: kernel.msgmax, value: "1"}]
          initContainers:
            - name: init
              image: registry.invalid/init:1
              securityContext:
                allowPrivilegeEscalation: true
                runAsUser: 0
                procMount: Unmasked
                seccompProfile: {type: Unconfined}
          containers:
            - name: side
              image: registry.invalid/side:1
              ports: [{containerPort: 80, hostPort: 80}]
              securityContext:
                seLinuxOptions: {type: spc_t}
                appArmorProfile: {type: Unconfined}
          volumes:
            - name: share
              nfs: {server: 10.0.0.1, path: /}
    trainer: {replicas: 1}
YAML
at=spec.roles.rollout.podTemplate.spec
refused escape \
  "$at.securityContext.windowsOptions.hostProcess" 'control "HostProcess"' \
  "$at.securityContext.sysctls[0].name" 'control "Sysctls"' \
  "$at.initContainers[0].securityContext.allowPrivilegeEscalation" 'control "Privilege Escalation"' \
  "$at.initContainers[0].securityContext.runAsUser" 'control "Running as Non-root user"' \
  "$at.initContainers[0].securityContext.procMount" 'control "/proc Mount Type"' \
  "$at.initContainers[0].securityContext.seccompProfile.type" 'control "Seccomp"' \
  "$at.containers[0].ports[0].hostPort" 'control "Host Ports"' \
  "$at.containers[0].securityContext.seLinuxOptions.type" 'control "SELinux"' \
  "$at.containers[0].securityContext.appArmorProfile.type" 'control "AppArmor"' \
  "$at.volumes[0].nfs" 'control "Volume Types"'

# ---- 2. admin rules: an empty ServiceAccount, template finalizers ---------------------------------
K8S_STEP="a tenant's RLJobs with serviceAccountName \"\" and finalizers"
kc --as tenant apply -f - >/dev/null <<'YAML'
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata: {name: nobody, namespace: research}
spec:
  roles:
    rollout: {replicas: 1, podTemplate: {spec: {serviceAccountName: ""}}}
    trainer: {replicas: 1}
---
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata: {name: sticky, namespace: research}
spec:
  roles:
    rollout: {replicas: 1, podTemplate: {metadata: {finalizers: [example.com/keep]}}}
    trainer: {replicas: 1}
YAML
refused nobody "$at.serviceAccountName" "rule serviceAccount"
refused sticky "spec.roles.rollout.podTemplate.metadata.finalizers" "rule finalizers"

# ---- 3. the operator's own pods meet restricted --------------------------------------------------
K8S_STEP="RLJob plain"
kc apply -f - >/dev/null <<'YAML'
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata: {name: plain, namespace: research}
spec:
  roles: {rollout: {replicas: 2}, trainer: {replicas: 1}}
YAML
wait_until 60 "plain did not get its 3 pods" has_pods plain 3
k8s_say "plain: 3 pods under the restricted level"
k8s_test_finish "PSS escapes, an empty ServiceAccount and template finalizers Failed naming" \
  "each field, no children; a plain job runs"
