#!/usr/bin/env bash
# The reward of an RLJob on a cluster (issue 39; operator/controller/reward_sidecar.h), on a real
# etcd + kube-apiserver (scripts/k8s-env.sh) with kwok running a fake GPU node and the real
# tlt-operator under tests/operator/rbac.yaml, started with --reward-url-allow
# http://reward.scoring:8000:
#   1. a job with spec.reward.container in a namespace enforcing the `restricted` Pod Security
#      Standard: its trainer pod is created (the apiserver's Pod Security Admission accepted it)
#      and runs; it carries the native sidecar "reward" (the author's image, command, env and
#      resources, the operator's restricted securityContext, restartPolicy Always), the emptyDir
#      tlt-reward mounted in both containers and TLT_REWARD_PIPE_DIR in the tlt container; the
#      rollout pod carries none of it. The same pod with the sidecar's securityContext taken out
#      is refused by that namespace (server-side dry run), so the admission did look at it;
#   2. the sidecar's shell script, run here with its FIFO directory moved to a temp dir: it waits
#      for the FIFOs, then a Python reward on them answers a request written by "the trainer";
#   3. an http reward URL outside the allow-list: Failed, reason RewardURLNotAllowed, the
#      condition and a Warning Event naming spec.reward.url and --reward-url-allow, no pod; the
#      operator stays ready; a URL below an allowed one: the job's pods are created.
# Stops every process it started (by PID) on exit, also on failure. Last line: PASS or FAIL.
# Usage: reward_apiserver.sh TLT_OPERATOR_BINARY SOURCE_DIR   (K8S_BIN=DIR, KEEP=1)
set -euo pipefail
op=$1
src=$(cd "$2" && pwd)
source "$src/scripts/k8s-env.sh"

k8s_test_begin reward_apiserver kwok
k8s_start_gpu_node
k8s_test_operator "$op" --watch-timeout 20 \
  --reward-url-allow http://reward.scoring:8000

# ---- 1. the reward container under the restricted Pod Security Standard -------------------------
K8S_STEP="a namespace enforcing the restricted Pod Security Standard"
kc create namespace strict >/dev/null
kc create serviceaccount default -n strict >/dev/null
kc label namespace strict pod-security.kubernetes.io/enforce=restricted \
  pod-security.kubernetes.io/enforce-version=latest >/dev/null
K8S_STEP="an RLJob with spec.reward.container"
kc apply -f - >/dev/null <<'YAML'
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata: {name: scored, namespace: strict}
spec:
  roles: {rollout: {replicas: 1}, trainer: {replicas: 1}}
  reward:
    type: command
    container:
      image: registry.invalid/reward:1
      command: [python3, /app/reward.py]
      env: {REWARD_MODE: strict}
      resources: {limits: {cpu: "1", memory: 512Mi}}
YAML
wait_until 60 "the job's 2 pods were not created in the restricted namespace" has_pods scored 2 strict
wait_until 60 "the job did not turn Running" phase_is rljob/scored Running strict
kc get pod scored-trainer-0 -n strict -o json >"$K8S_TMP/trainer.json"
kc get pod scored-rollout-0 -n strict -o json >"$K8S_TMP/rollout.json"
K8S_STEP="the trainer pod carries the reward sidecar"
python3 - "$K8S_TMP/trainer.json" "$K8S_TMP/rollout.json" <<'PY' || fail "the pods' shape (above)"
import json, sys
pod = json.load(open(sys.argv[1]))
spec = pod["spec"]
side = {c["name"]: c for c in spec.get("initContainers", [])}.get("reward")
assert side, "no initContainer reward: %s" % spec.get("initContainers")
assert side["image"] == "registry.invalid/reward:1", side["image"]
assert side.get("restartPolicy") == "Always", "not a native sidecar: %s" % side.get("restartPolicy")
cmd = side["command"]
assert cmd[:2] == ["/bin/sh", "-c"] and cmd[3:] == ["reward", "python3", "/app/reward.py"], cmd
assert side["env"] == [{"name": "REWARD_MODE", "value": "strict"},
                       {"name": "PYTHONUNBUFFERED", "value": "1"}], side["env"]
assert side["resources"]["limits"] == {"cpu": "1", "memory": "512Mi"}, side["resources"]
sc = side["securityContext"]
assert sc == {"runAsNonRoot": True, "allowPrivilegeEscalation": False,
              "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}, sc
mount = {"name": "tlt-reward", "mountPath": "/var/run/tlt-reward"}
assert mount in side["volumeMounts"], side["volumeMounts"]
volumes = {v["name"]: v for v in spec["volumes"]}
assert volumes.get("tlt-reward", {}).get("emptyDir") == {}, volumes.get("tlt-reward")
tlt = [c for c in spec["containers"] if c["name"] == "tlt"][0]
assert mount in tlt["volumeMounts"], tlt["volumeMounts"]
env = {e["name"]: e.get("value") for e in tlt["env"]}
assert env.get("TLT_REWARD_PIPE_DIR") == "/var/run/tlt-reward", env
assert [c["name"] for c in spec["containers"]] == ["tlt"], spec["containers"]
rollout = json.load(open(sys.argv[2]))["spec"]
assert "initContainers" not in rollout and "tlt-reward" not in {v["name"] for v in rollout["volumes"]}
print("  scored-trainer-0: sidecar reward (%s), tlt-reward mounted in both, TLT_REWARD_PIPE_DIR set"
      % side["image"])
PY
K8S_STEP="the sidecar without the operator's securityContext, by server-side dry run"
python3 - "$K8S_TMP/trainer.json" >"$K8S_TMP/loose.json" <<'PY'
import json, sys
pod = json.load(open(sys.argv[1]))
pod["metadata"] = {"name": "loose-trainer", "namespace": "strict"}
pod.pop("status", None)
spec = pod["spec"]
spec.pop("nodeName", None)
for c in spec["initContainers"]:
    if c["name"] == "reward":
        c.pop("securityContext")
json.dump(pod, sys.stdout)
PY
if kc create --dry-run=server -f "$K8S_TMP/loose.json" >"$K8S_TMP/loose.out" 2>&1; then
  fail "the restricted namespace admitted the sidecar without its securityContext"
fi
grep -q 'violates PodSecurity' "$K8S_TMP/loose.out" || fail "not a PodSecurity refusal: $(cat "$K8S_TMP/loose.out")"
k8s_say "restricted namespace: the job's trainer pod with its reward sidecar admitted and Running;" \
  "the same sidecar without the operator's securityContext refused"

# ---- 2. the sidecar's script on FIFOs -----------------------------------------------------------
K8S_STEP="the sidecar's script answering on its FIFOs"
pipes="$K8S_TMP/pipes"
mkdir -p "$pipes"
cat >"$K8S_TMP/reward.py" <<'PY'
import json, sys
for line in sys.stdin:
    req = json.loads(line)
    print(json.dumps({"id": req["id"], "reward": float(req["response"] == req["answer"])}), flush=True)
PY
python3 - "$K8S_TMP/trainer.json" "$pipes" "$K8S_TMP/reward.py" <<'PY' || fail "$K8S_STEP (above)"
import json, os, subprocess, sys, time
spec = json.load(open(sys.argv[1]))["spec"]
side = [c for c in spec["initContainers"] if c["name"] == "reward"][0]
pipes, program = sys.argv[2], sys.argv[3]
script = side["command"][2].replace("/var/run/tlt-reward", pipes)
proc = subprocess.Popen(["/bin/sh", "-c", script, "reward", sys.executable, program])
time.sleep(0.6)
assert proc.poll() is None, "the script ended before the FIFOs existed (code %s)" % proc.returncode
os.mkfifo(os.path.join(pipes, "requests"))
os.mkfifo(os.path.join(pipes, "rewards"))
# The trainer's side: requests opened for writing first, then rewards for reading (the order in
# which the sidecar's shell opens them).
deadline = time.time() + 20
w = open(os.path.join(pipes, "requests"), "w")
r = open(os.path.join(pipes, "rewards"))
for i, (resp, ans) in enumerate([("42", "42"), ("41", "42")]):
    w.write(json.dumps({"id": "r%d" % i, "prompt": "p", "response": resp, "answer": ans}) + "\n")
w.flush()
got = [json.loads(r.readline()) for _ in range(2)]
assert got == [{"id": "r0", "reward": 1.0}, {"id": "r1", "reward": 0.0}], got
w.close()
proc.wait(timeout=max(1, deadline - time.time()))
assert proc.returncode == 0, "the reward program ended with %s" % proc.returncode
print("  the sidecar's script waited for the FIFOs and the reward answered: %s" % got)
PY
k8s_say "the sidecar's script: waits for the FIFOs, execs the reward on them, ends at EOF"

# ---- 3. http reward URLs against --reward-url-allow ------------------------------------------------
http_job() {  # NAME URL
  kc apply -f - >/dev/null <<YAML
apiVersion: tlt.dev/v1alpha1
kind: RLJob
metadata: {name: $1, namespace: research}
spec:
  roles: {rollout: {replicas: 1}, trainer: {replicas: 1}}
  reward: {type: http, url: "$2"}
YAML
}
K8S_STEP="an http reward URL outside the allow-list"
http_job outside http://reward.elsewhere:8000/score
wait_until 60 "the job with a URL outside the allow-list did not turn Failed" phase_is rljob/outside Failed
reason=$(cond rljob/outside Failed reason)
message=$(cond rljob/outside Failed message)
[[ $reason == RewardURLNotAllowed ]] || fail "reason \"$reason\""
for needle in spec.reward.url http://reward.elsewhere:8000/score --reward-url-allow; do
  [[ $message == *"$needle"* ]] || fail "the message does not name $needle: $message"
done
wait_until 30 "no Warning Event RewardURLNotAllowed" has_event outside RewardURLNotAllowed
[[ $(count_pods outside) -eq 0 ]] || fail "the refused job got pods"
curl -sf "http://127.0.0.1:$METRICS_PORT/readyz" >/dev/null || fail "the operator is not ready"
k8s_say "URL outside the allow-list: Failed, $reason: $message"
K8S_STEP="an http reward URL below an allowed one"
http_job inside http://reward.scoring:8000/v1/score
wait_until 60 "the job with an allowed URL did not get its 2 pods" has_pods inside 2
[[ $(cond rljob/inside Failed status) != True ]] || fail "the allowed job: $(cond rljob/inside Failed message)"
k8s_say "URL below an allowed one: the job's pods are created"
k8s_test_finish "reward sidecar admitted under restricted PSS and answering on its FIFOs;" \
  "http reward URL outside the allow-list refused, inside it runs"
