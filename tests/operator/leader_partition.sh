#!/usr/bin/env bash
# Leadership as client-go does it (issue 21): a leader cut off from the apiserver steps down --
# logs leader=0 and exits -- before another replica can take the Lease over.
# On a real etcd + kube-apiserver (scripts/k8s-env.sh): replica-1 reaches the apiserver through a
# loopback TCP proxy that this script can cut (it then swallows every byte in both directions
# and holds new connections open without forwarding them: a partition, not a refused
# connection); replica-2 reaches it directly. Both run with --lease-duration 6 (renew deadline
# 4 s). replica-1 leads; the proxy is cut; the script watches both logs every 0.05 s and
# requires replica-1's step-down ("Stopped after losing leadership", leader=0) to come before
# replica-2's "Took over the leader Lease", replica-1 to have exited, and replica-2 to lead.
# Stops every process it started (by PID) on exit, also on failure. Last line: PASS or FAIL.
# Usage: leader_partition.sh TLT_OPERATOR_BINARY SOURCE_DIR   (K8S_BIN=DIR, KEEP=1)
set -euo pipefail
op=$1
src=$(cd "$2" && pwd)
source "$src/scripts/k8s-env.sh"

k8s_test_begin leader_partition
k8s_install_operator
K8S_FAIL_LOGS="operator operator-2 proxy"

# ---- the proxy: forwards 127.0.0.1:PORT to the apiserver until $K8S_TMP/cut exists --------------
cat >"$K8S_TMP/proxy.py" <<'PY'
import os, socket, sys, threading, time
upstream_port, port_file, cut_file = int(sys.argv[1]), sys.argv[2], sys.argv[3]
def pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            if not os.path.exists(cut_file):  # cut: the bytes vanish, the socket stays open
                dst.sendall(data)
    except OSError:
        pass
def serve(client):
    while os.path.exists(cut_file):  # a connection made during the cut goes nowhere
        time.sleep(0.5)
    up = socket.create_connection(("127.0.0.1", upstream_port))
    threading.Thread(target=pump, args=(client, up), daemon=True).start()
    threading.Thread(target=pump, args=(up, client), daemon=True).start()
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", 0))
srv.listen(64)
with open(port_file + ".tmp", "w") as f:
    f.write(str(srv.getsockname()[1]))
os.rename(port_file + ".tmp", port_file)
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
PY
K8S_STEP="start the proxy"
k8s_start proxy "$K8S_TMP/proxy.log" python3 "$K8S_TMP/proxy.py" "$API_PORT" "$K8S_TMP/proxy.port" \
  "$K8S_TMP/cut"
wait_until 10 "the proxy wrote no port" test -s "$K8S_TMP/proxy.port"
PROXY_PORT=$(cat "$K8S_TMP/proxy.port")

start_replica() {  # NAME PORT IDENTITY APISERVER_PORT
  k8s_start_operator --name "$1" --api-port "$4" "$op" "$2" --leader-elect \
    --leader-election-namespace tlt-system --leader-election-identity "$3" --lease-duration 6 \
    --watch-timeout 20 || fail "$K8S_STEP"
}
k8s_free_port PORT_1
k8s_free_port PORT_2
K8S_STEP="replica-1 (through the proxy) leads"
start_replica operator "$PORT_1" replica-1 "$PROXY_PORT"
R1=$K8S_LAST_PID
holder() { [[ $(kc get lease tlt-operator -n tlt-system -o 'jsonpath={.spec.holderIdentity}') == "$1" ]]; }
wait_until 30 "replica-1 did not take the Lease" holder replica-1
curl -sf "http://127.0.0.1:$PORT_1/metrics" | grep -qx 'tlt_operator_leader 1' || fail "replica-1 does not report leader 1"
K8S_STEP="replica-2 (direct) waits"
start_replica operator-2 "$PORT_2" replica-2 "$API_PORT"
waiting() { grep -q 'another replica holds the leader Lease' "$K8S_TMP/operator-2.log"; }
wait_until 30 "replica-2 did not wait on the Lease" waiting
curl -sf "http://127.0.0.1:$PORT_2/metrics" | grep -qx 'tlt_operator_leader 0' || fail "replica-2 does not report leader 0"

K8S_STEP="cut replica-1 off"
now() { date +%s.%N; }
touch "$K8S_TMP/cut"
t_cut=$(now) t_down="" t_took=""
deadline=$((SECONDS + 40))
while [[ -z $t_down || -z $t_took ]] && ((SECONDS < deadline)); do
  [[ -z $t_down ]] && grep -q 'Stopped after losing leadership' "$K8S_TMP/operator.log" && t_down=$(now)
  [[ -z $t_took ]] && grep -q 'Took over the leader Lease' "$K8S_TMP/operator-2.log" && t_took=$(now)
  sleep 0.05
done
[[ -n $t_down ]] || fail "replica-1 did not step down within 40 s of the cut"
[[ -n $t_took ]] || fail "replica-2 did not take the Lease over within 40 s of the cut"
secs() { python3 -c "import sys; print('%.1f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$1" "$2"; }
down=$(secs "$t_cut" "$t_down") took=$(secs "$t_cut" "$t_took")
python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) < float(sys.argv[2]) else 1)" "$t_down" "$t_took" ||
  fail "replica-2 took the Lease ${took} s after the cut, before replica-1 stepped down (${down} s): two leaders"
grep 'Stopped after losing leadership' "$K8S_TMP/operator.log" | grep -q 'leader=0' ||
  fail "the step-down line does not report leader=0"
for ((i = 0; i < 50; i++)); do kill -0 "$R1" 2>/dev/null || break; sleep 0.1; done
! kill -0 "$R1" 2>/dev/null || fail "replica-1 still runs after stepping down"
wait_until 10 "replica-2 does not report leader 1" \
  bash -c "curl -sf http://127.0.0.1:$PORT_2/metrics | grep -qx 'tlt_operator_leader 1'"
holder replica-2 || fail "the Lease is not held by replica-2"
k8s_test_finish "cut at 0 s: replica-1 stepped down (leader=0, exited) at ${down} s, replica-2" \
  "took over at ${took} s"
