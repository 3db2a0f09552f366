#!/usr/bin/env python3
"""Pods for the Pod Security Standards differential test (pss_differential.sh).

Writes COUNT pods, seeded, one JSON object a line, to stdout: each a valid Pod (so that the
apiserver's own validation lets it reach Pod Security Admission) built from a compliant or a bare
base and then changed by a few random mutations, each touching the fields of one control of the
standards (host namespaces, hostProcess, privileged, capabilities, volumes, hostPort, probe and
lifecycle hosts, AppArmor fields and annotations, SELinux, procMount, seccomp fields and the
alpha annotations, sysctls,
allowPrivilegeEscalation, runAsNonRoot, runAsUser, hostUsers, os) with good and bad values, in
containers and init containers. Pairs that the apiserver's validation refuses (privileged with
allowPrivilegeEscalation false, windows pods with Linux fields, ...) are repaired, not emitted.

Usage: pss_cases.py COUNT SEED
"""
import copy
import json
import random
import sys


def base_pod(rng, i):
    n_containers = rng.choice([1, 1, 2, 3])
    n_init = rng.choice([0, 0, 1, 2])
    containers = [{"name": "c%d" % k, "image": "registry.invalid/app:1"} for k in range(n_containers)]
    inits = [{"name": "i%d" % k, "image": "registry.invalid/init:1"} for k in range(n_init)]
    spec = {"containers": containers, "automountServiceAccountToken": False}
    if inits:
        spec["initContainers"] = inits
    if rng.random() < 0.6:  # compliant with restricted to begin with
        spec["securityContext"] = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
        for c in containers + inits:
            c["securityContext"] = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p%04d" % i}, "spec": spec}


def all_containers(pod):
    s = pod["spec"]
    return s.get("initContainers", []) + s["containers"]


def sc_of(obj):
    return obj.setdefault("securityContext", {})


def pick_container(rng, pod, regular_only=False):
    return rng.choice(pod["spec"]["containers"] if regular_only else all_containers(pod))


def m_host_namespaces(rng, pod):
    pod["spec"][rng.choice(["hostNetwork", "hostPID", "hostIPC"])] = rng.choice([True, False])


def m_host_process(rng, pod):
    v = rng.choice([True, True, False])
    if rng.random() < 0.5:
        sc_of(pod["spec"])["windowsOptions"] = {"hostProcess": v}
    else:
        for c in all_containers(pod):
            sc_of(c)["windowsOptions"] = {"hostProcess": v}
    if v:
        pod["spec"]["hostNetwork"] = True


def m_privileged(rng, pod):
    sc_of(pick_container(rng, pod))["privileged"] = rng.choice([True, False, None])


def m_capabilities(rng, pod):
    c = sc_of(pick_container(rng, pod))
    caps = c.setdefault("capabilities", {})
    if rng.random() < 0.6:
        caps["add"] = rng.sample(["NET_BIND_SERVICE", "CHOWN", "KILL", "NET_RAW", "SYS_TIME", "NET_ADMIN"],
                                 rng.choice([1, 1, 2]))
    else:
        caps["drop"] = rng.choice([["ALL"], ["NET_RAW"], [], ["ALL", "NET_RAW"], ["all"]])


VOLUMES = [
    {"emptyDir": {}}, {"configMap": {"name": "cm"}}, {"secret": {"secretName": "s"}},
    {"persistentVolumeClaim": {"claimName": "claim"}}, {"downwardAPI": {"items": []}},
    {"projected": {"sources": []}}, {"csi": {"driver": "csi.example.com"}},
    {"ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"],
                                                    "resources": {"requests": {"storage": "1Gi"}}}}}},
    {"hostPath": {"path": "/var/log"}}, {"nfs": {"server": "10.0.0.1", "path": "/x"}},
    {"cephfs": {"monitors": ["10.0.0.1:6789"]}}, {"azureFile": {"secretName": "s", "shareName": "x"}},
    {"flexVolume": {"driver": "example.com/flex"}}, {"fc": {"wwids": ["3600508b400105e21"]}},
    {"iscsi": {"targetPortal": "10.0.0.1:3260", "iqn": "iqn.2001-04.com.example:storage", "lun": 0}},
    {}, {"hostPath": None},  # no source: the apiserver makes it an emptyDir
]


def m_volumes(rng, pod):
    vols = pod["spec"].setdefault("volumes", [])
    source = copy.deepcopy(rng.choice(VOLUMES))
    vols.append(dict({"name": "v%d" % len(vols)}, **source))


def m_host_port(rng, pod):
    c = pick_container(rng, pod)
    k = all_containers(pod).index(c)
    port = 8000 + k
    c["ports"] = [{"containerPort": port, "hostPort": rng.choice([port, 0, None])}]


def m_probe_host(rng, pod):
    c = pick_container(rng, pod, regular_only=True)
    host = rng.choice(["", "10.0.0.9", "example.com", None])
    if rng.random() < 0.7:
        kind = rng.choice(["httpGet", "tcpSocket"])
        action = {"port": 8080}
        if kind == "httpGet":
            action["path"] = "/"
        if host is not None:
            action["host"] = host
        c[rng.choice(["livenessProbe", "readinessProbe", "startupProbe"])] = {kind: action}
    else:
        action = {"port": 8080, "path": "/"}
        if host is not None:
            action["host"] = host
        c["lifecycle"] = {rng.choice(["postStart", "preStop"]): {"httpGet": action}}


def apparmor(rng):
    t = rng.choice(["RuntimeDefault", "Localhost", "Unconfined"])
    return {"type": t, "localhostProfile": "k8s-x"} if t == "Localhost" else {"type": t}


def m_apparmor(rng, pod):
    r = rng.random()
    if r < 0.3:
        sc_of(pod["spec"])["appArmorProfile"] = apparmor(rng)
    elif r < 0.6:
        sc_of(pick_container(rng, pod))["appArmorProfile"] = apparmor(rng)
    else:
        c = pick_container(rng, pod)
        pod["metadata"].setdefault("annotations", {})[
            "container.apparmor.security.beta.kubernetes.io/" + c["name"]] = rng.choice(
            ["runtime/default", "localhost/k8s-x", "unconfined"])


def m_selinux(rng, pod):
    opts = {}
    opts["type"] = rng.choice(["", "container_t", "container_init_t", "container_kvm_t",
                               "container_engine_t", "spc_t", "unconfined_t"])
    if rng.random() < 0.2:
        opts["user"] = "system_u"
    if rng.random() < 0.2:
        opts["role"] = "system_r"
    if rng.random() < 0.3:
        opts["level"] = "s0:c1,c2"
    target = pod["spec"] if rng.random() < 0.4 else pick_container(rng, pod)
    sc_of(target)["seLinuxOptions"] = opts


def m_proc_mount(rng, pod):
    sc_of(pick_container(rng, pod))["procMount"] = rng.choice(["Default", "Unmasked", "Unmasked"])
    if rng.random() < 0.5:
        pod["spec"]["hostUsers"] = False


def seccomp(rng):
    t = rng.choice(["RuntimeDefault", "Localhost", "Unconfined", "Unconfined"])
    return {"type": t, "localhostProfile": "profiles/x.json"} if t == "Localhost" else {"type": t}


def m_seccomp(rng, pod):
    r = rng.random()
    if r < 0.35:
        sc_of(pod["spec"])["seccompProfile"] = seccomp(rng)
    elif r < 0.5:
        sc_of(pod["spec"]).pop("seccompProfile", None)
    else:
        sc_of(pick_container(rng, pod))["seccompProfile"] = seccomp(rng)


SYSCTLS = ["kernel.shm_rmid_forced", "net.ipv4.tcp_syncookies", "net.ipv4.ip_local_port_range",
           "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_rmem", "net.ipv4.ip_local_reserved_ports",
           "kernel.msgmax", "net.core.somaxconn", "kernel.sem", "net.ipv4.tcp_fastopen"]


def m_seccomp_annotation(rng, pod):
    """The alpha annotations: not a control at the latest version."""
    key = rng.choice(["seccomp.security.alpha.kubernetes.io/pod",
                      "container.seccomp.security.alpha.kubernetes.io/" + pick_container(rng, pod)["name"]])
    pod["metadata"].setdefault("annotations", {})[key] = rng.choice(["unconfined", "runtime/default"])


def m_sysctls(rng, pod):
    names = rng.sample(SYSCTLS, rng.choice([1, 1, 2]))
    values = {"net.ipv4.ip_local_port_range": "1024 65000", "net.ipv4.tcp_rmem": "4096 87380 6291456",
              "net.ipv4.ip_local_reserved_ports": "30000", "kernel.sem": "250 32000 100 128"}
    sc_of(pod["spec"])["sysctls"] = [{"name": n, "value": values.get(n, "1")} for n in names]


def m_allow_privilege_escalation(rng, pod):
    sc_of(pick_container(rng, pod))["allowPrivilegeEscalation"] = rng.choice([True, False, None])


def m_run_as_non_root(rng, pod):
    target = pod["spec"] if rng.random() < 0.5 else pick_container(rng, pod)
    sc_of(target)["runAsNonRoot"] = rng.choice([True, False, None])


def m_run_as_user(rng, pod):
    target = pod["spec"] if rng.random() < 0.5 else pick_container(rng, pod)
    sc_of(target)["runAsUser"] = rng.choice([0, 0, 1000, 65532])


def m_host_users(rng, pod):
    pod["spec"]["hostUsers"] = rng.choice([False, False, True])


def m_os(rng, pod):
    pod["spec"]["os"] = {"name": rng.choice(["linux", "windows", "windows"])}


MUTATIONS = [m_host_namespaces, m_host_process, m_privileged, m_capabilities, m_volumes,
             m_host_port, m_probe_host, m_apparmor, m_selinux, m_proc_mount, m_seccomp, m_seccomp_annotation, m_sysctls,
             m_allow_privilege_escalation, m_run_as_non_root, m_run_as_user, m_host_users, m_os]

# Fields the apiserver refuses on a pod whose spec.os.name is windows.
WINDOWS_POD_FORBIDDEN = ["appArmorProfile", "seLinuxOptions", "seccompProfile", "sysctls",
                         "runAsUser", "runAsGroup", "fsGroup"]
WINDOWS_CONTAINER_FORBIDDEN = ["appArmorProfile", "seLinuxOptions", "seccompProfile", "capabilities",
                               "readOnlyRootFilesystem", "privileged", "allowPrivilegeEscalation",
                               "procMount", "runAsUser", "runAsGroup"]


def drop_none(obj):
    if isinstance(obj, dict):
        return {k: drop_none(v) for k, v in obj.items() if v is not None or k == "hostPath"}
    if isinstance(obj, list):
        return [drop_none(v) for v in obj]
    return obj


def repair(pod):
    """Makes the pod valid for the apiserver without touching what the standards look at more than
    needed."""
    spec = pod["spec"]
    os_name = spec.get("os", {}).get("name")
    host_process = any(sc_of(c).get("windowsOptions", {}).get("hostProcess") for c in all_containers(pod)) or \
        sc_of(spec).get("windowsOptions", {}).get("hostProcess")
    if os_name == "linux" or spec.get("hostUsers") is False and host_process:
        for obj in [spec] + all_containers(pod):
            sc_of(obj).pop("windowsOptions", None)
        host_process = False
    if host_process:  # every container must be a hostProcess one, with the host's network
        spec["hostNetwork"] = True
        if sc_of(spec).get("windowsOptions", {}).get("hostProcess") is not True:
            for c in all_containers(pod):
                sc_of(c)["windowsOptions"] = {"hostProcess": True}
    if os_name == "windows":
        for k in WINDOWS_POD_FORBIDDEN:
            sc_of(spec).pop(k, None)
        for c in all_containers(pod):
            for k in WINDOWS_CONTAINER_FORBIDDEN:
                sc_of(c).pop(k, None)
        for k in ["hostUsers", "hostPID", "hostIPC"]:
            spec.pop(k, None)
        pod["metadata"].pop("annotations", None)
    if spec.get("hostUsers") is False:
        for k in ["hostNetwork", "hostPID", "hostIPC"]:
            spec.pop(k, None)
        spec["volumes"] = [v for v in spec.get("volumes", []) if not v.get("hostPath")]
    for c in all_containers(pod):
        sc = sc_of(c)
        if sc.get("procMount") == "Unmasked" and spec.get("hostUsers") is not False:
            sc["procMount"] = "Default" if len(pod["metadata"]["name"]) % 2 else None
        escalates = sc.get("privileged") or "SYS_ADMIN" in sc.get("capabilities", {}).get("add", [])
        if escalates and sc.get("allowPrivilegeEscalation") is False:
            sc["allowPrivilegeEscalation"] = None
        if spec.get("hostNetwork"):
            for p in c.get("ports", []):
                if p.get("hostPort"):
                    p["hostPort"] = p["containerPort"]
    sysctls = sc_of(spec).get("sysctls", [])
    if spec.get("hostNetwork"):
        sysctls = [s for s in sysctls if not s["name"].startswith("net.")]
    if spec.get("hostIPC"):
        sysctls = [s for s in sysctls if not s["name"].startswith("kernel.")]
    if sysctls:
        sc_of(spec)["sysctls"] = sysctls
    else:
        sc_of(spec).pop("sysctls", None)
    # AppArmor: an annotation and a field on the same container must agree; keep the field.
    ann = pod["metadata"].get("annotations", {})
    for c in all_containers(pod):
        key = "container.apparmor.security.beta.kubernetes.io/" + c["name"]
        if key in ann and ("appArmorProfile" in sc_of(c) or "appArmorProfile" in sc_of(spec)):
            del ann[key]
    # Seccomp: an annotation and a field on the same pod or container must agree; keep the field.
    if "seccompProfile" in sc_of(spec):
        ann.pop("seccomp.security.alpha.kubernetes.io/pod", None)
    for c in all_containers(pod):
        if "seccompProfile" in sc_of(c):
            ann.pop("container.seccomp.security.alpha.kubernetes.io/" + c["name"], None)
    for obj in [spec] + all_containers(pod):
        if not obj.get("securityContext"):
            obj.pop("securityContext", None)
    return drop_none(pod)


def main():
    count, seed = int(sys.argv[1]), int(sys.argv[2])
    rng = random.Random(seed)
    for i in range(count):
        pod = base_pod(rng, i)
        for m in rng.sample(MUTATIONS, rng.choice([0, 1, 1, 2, 2, 3, 4])):
            m(rng, pod)
        print(json.dumps(repair(pod), sort_keys=True))


if __name__ == "__main__":
    main()
