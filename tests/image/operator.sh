#!/usr/bin/env bash
# The operator image tlt-operator:VERSION (tests/image/build.sh builds it) against a real etcd +
# kube-apiserver with kwok's fake GPU node (scripts/k8s-env.sh): its /usr/local/bin/tlt-operator
# runs from the image's root file system, read-only, as the image's USER (65532), in-cluster style
# (the ServiceAccount token mounted read-only, as a pod gets it), and reconciles an RLJob to its
# 3 pods, its headless Service and spec ConfigMap, status Running; deleting the job leaves nothing.
# Last line: PASS or FAIL, naming the step.
# Usage: operator.sh SOURCE_DIR   (K8S_BIN=DIR, KEEP=1 as scripts/k8s-env.sh)
set -euo pipefail
src=$(cd "$1" && pwd)
source "$src/tests/image/common.sh"
image_begin image.operator
source "$src/scripts/k8s-env.sh"

image_on_exit() {  # K8S_ON_EXIT: the working container goes once the operator is stopped
  image_track
  image_cleanup
  k8s_test_verdict "$1"
}
k8s_test_begin image.operator kwok
K8S_ON_EXIT=image_on_exit
K8S_FAIL_LOGS="operator kwok"

K8S_STEP="a working container of $(image_ref tlt-operator)"
root=$(image_rootfs tlt-operator) || fail "$K8S_STEP: see above"
image_track
image_run_args tlt-operator
k8s_start_gpu_node
k8s_install_operator
# The CRDs of the image's own operator (the same as crds/ when the tree is consistent:
# operator.crds_current), so the test exercises the image, not the tree's newer CRDs.
K8S_STEP="tlt-operator --print-crds from the image"
"$src/tests/image/run_in_image.sh" "$root" "${IMG_RUN_ARGS[@]}" -- tlt-operator --print-crds \
  >"$IMG_WORK/crds.yaml" || fail "$K8S_STEP exited non-zero"
kc apply --server-side --force-conflicts -f "$IMG_WORK/crds.yaml" >/dev/null

# The token and CA as a pod sees them: readable by the operator's user, mounted read-only where
# k8s_start_operator's --service-account-dir points.
cp -r "$K8S_TMP/sa" "$IMG_WORK/sa"
chmod 755 "$IMG_WORK/sa" && chmod 644 "$IMG_WORK/sa"/*
wrapper=$IMG_WORK/tlt-operator-in-image
cat >"$wrapper" <<EOF
#!/usr/bin/env bash
exec "$src/tests/image/run_in_image.sh" "$root" $(printf '%q ' "${IMG_RUN_ARGS[@]}") \\
  --bind "$IMG_WORK/sa:$K8S_TMP/sa:ro" \\
  --env KUBERNETES_SERVICE_HOST="\$KUBERNETES_SERVICE_HOST" \\
  --env KUBERNETES_SERVICE_PORT="\$KUBERNETES_SERVICE_PORT" -- /usr/local/bin/tlt-operator "\$@"
EOF
chmod 755 "$wrapper"
K8S_STEP="tlt-operator from the image"
k8s_test_operator "$wrapper" --watch-timeout 20
[[ $(stat -L -c %i "/proc/$OP_PID/exe") == $(stat -c %i "$root/usr/local/bin/tlt-operator") ]] ||
  fail "pid $OP_PID runs $(readlink "/proc/$OP_PID/exe"), not the image's /usr/local/bin/tlt-operator"
awk '$5 == "/" {print $6}' "/proc/$OP_PID/mountinfo" | grep -q '^ro' ||
  fail "the operator's root file system is not read-only"
[[ $(awk '/^Uid:/ {print $2}' "/proc/$OP_PID/status") == 65532 ]] || fail "the operator does not run as uid 65532"
k8s_say "tlt-operator ready from $(image_ref tlt-operator) (pid $OP_PID, uid 65532, read-only root)"

RL=image-rl
K8S_STEP="kubectl apply of an RLJob"
kc apply -f - >/dev/null <<'EOF'
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata: {name: image-rl, namespace: research}
spec:
  model: {preset: micro}
  roles: {rollout: {replicas: 2}, trainer: {replicas: 1}}
EOF
wait_until 90 "the RLJob's 3 pods were not created" has_pods $RL 3
K8S_STEP="the RLJob's children"
kc get service $RL-rl -n research -o 'jsonpath={.spec.clusterIP}' | grep -qx None ||
  fail "Service $RL-rl is missing or not headless"
kc get configmap $RL-rl-spec -n research -o 'jsonpath={.data.job\.json}' | grep -q '"rollout"' ||
  fail "ConfigMap $RL-rl-spec has no job.json"
wait_until 90 "the RLJob's status did not turn Running" phase_is rljob/$RL Running
k8s_say "RLJob $RL: 3 pods, headless Service, spec ConfigMap, Running"

K8S_STEP="kubectl delete rljob"
kc delete rljob $RL -n research --wait=true --timeout=60s >/dev/null
wait_until 60 "pods of the deleted job remain" has_pods $RL 0
left=$(kc get pods,services,configmaps -n research -l tlt.dev/job -o name)
[[ -z $left ]] || fail "the deleted job left: $left"
kill -0 "$OP_PID" || fail "the operator exited"
k8s_test_finish "tlt-operator from $(image_ref tlt-operator) (uid 65532, read-only root) reconciled" \
  "an RLJob to its 3 pods, Service and ConfigMap, Running, then deleted it"
