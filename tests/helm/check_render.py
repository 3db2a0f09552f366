#!/usr/bin/env python3
"""Checks what `helm template` rendered from helm/tlt (run by tests/helm/chart.sh).

  default: exactly the operator's objects (no monitors, no dashboards); full: also a
  ServiceMonitor, a PodMonitor and one ConfigMap per dashboard; namespaced (a watch namespace):
  Roles only, no cluster-wide grant.
  Deployment: non-root pod, read-only root filesystem, no privilege escalation, all
  capabilities dropped, resource requests, /healthz and /readyz probes on a declared port, every
  flag in args accepted by the real tlt-operator (its --help), ports matching the flags, image
  repository:tag (tag defaulting to appVersion).
  Service and ServiceMonitor select what they should, on the port named `metrics`; monitors
  have honorLabels true; the PodMonitor selects job pods by tlt.dev/job.
  Each job's NetworkPolicy: --job-network-policy as networkPolicy.enabled says (true by default,
  false in the namespaced rendering), one --network-policy-metrics-from per namespace label.
  RBAC: no wildcards; secrets only as the jobs' own Secrets need them (never update or
  deletecollection, in a rule of their own); every subject is the Deployment's ServiceAccount, except the
  job pods' runtime role (pods get/list/patch), bound to a namespace's default ServiceAccount.
  Dashboards: label grafana_dashboard "1", contents byte-identical to dashboards/*.json.
Exit 0 if all hold, 1 otherwise (every failure is printed).
  RBAC also grants exactly what tests/operator/rbac.yaml grants (the RBAC the real
  tlt-operator runs with in tests/operator/controller_apiserver.sh), rule for rule.
Usage: check_render.py default|full|namespaced RENDERED.yaml OPERATOR_HELP.txt SOURCE_DIR
"""
import glob
import json
import os
import re
import sys

import yaml

mode, rendered, help_file, src = sys.argv[1:5]
failures = []


def check(ok, msg):
    if not ok:
        failures.append(msg)
        print("FAIL: %s: %s" % (mode, msg))
    return ok


docs = [d for d in yaml.safe_load_all(open(rendered)) if d]
by_kind = {}
for d in docs:
    by_kind.setdefault(d["kind"], []).append(d)
kinds = {k: len(v) for k, v in by_kind.items()}
chart = yaml.safe_load(open(os.path.join(src, "helm", "tlt", "Chart.yaml")))
dashboards = sorted(glob.glob(os.path.join(src, "dashboards", "*.json")))

# (no role for the job pods: the operator makes each job's own identity)
want = {"ServiceAccount": 1, "ClusterRole": 1, "ClusterRoleBinding": 1, "Role": 1,
        "RoleBinding": 1, "Service": 1, "Deployment": 1}
if mode == "namespaced":  # operator.watchNamespace set: no cluster-wide grant at all
    want.update({"ClusterRole": 0, "ClusterRoleBinding": 0, "Role": 2, "RoleBinding": 2})
    want = {k: v for k, v in want.items() if v}
if mode == "full":  # kueue.enabled too: its ClusterRole and binding
    want.update({"ServiceMonitor": 1, "PodMonitor": 1, "ConfigMap": len(dashboards),
                 "ClusterRole": 2, "ClusterRoleBinding": 2})
check(kinds == want, "rendered kinds %s, want %s" % (kinds, want))

# ---- Deployment --------------------------------------------------------------------------------
dep = by_kind["Deployment"][0]
pod = dep["spec"]["template"]
psc = pod["spec"].get("securityContext", {})
check(psc.get("runAsNonRoot") is True and psc.get("runAsUser", 0) != 0,
      "pod securityContext must run as a non-root UID: %s" % psc)
(c,) = pod["spec"]["containers"]
sc = c.get("securityContext", {})
check(sc.get("readOnlyRootFilesystem") is True, "root filesystem not read-only: %s" % sc)
check(sc.get("allowPrivilegeEscalation") is False, "privilege escalation allowed: %s" % sc)
check(sc.get("capabilities", {}).get("drop") == ["ALL"], "capabilities not all dropped: %s" % sc)
req = c.get("resources", {}).get("requests", {})
check("cpu" in req and "memory" in req, "no cpu and memory requests: %s" % c.get("resources"))
ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
    get = c.get(probe, {}).get("httpGet", {})
    check(get.get("path") == path and get.get("port") in ports,
          "%s must GET %s on a declared port (ports %s): %s" % (probe, path, ports, get))
help_text = open(help_file).read()
flags = {}
for a in c.get("args", []):
    check(a.startswith("--"), "argument %r is not a --flag" % a)
    flag, _, value = a.partition("=")
    flags[flag] = value
    check(re.search(r"(^|[ ,])%s\b" % re.escape(flag), help_text, re.M) is not None,
          "the real tlt-operator has no flag %s (see tlt-operator --help); the chart is out of "
          "step with operator/main.cc" % flag)
# Prometheus: no job URL is fetched unless the values allow it.
prom = [a for a in c.get("args", []) if a.startswith("--prometheus-url")]
want_prom = ["--prometheus-url=http://prometheus-operated.monitoring:9090",
             "--prometheus-url-allow=http://prometheus-operated.monitoring:9090"] if mode == "full" else []
check(prom == want_prom, "prometheus flags %s, expected %s" % (prom, want_prom))
# Rewards: no http reward URL is allowed unless the values list it.
reward = [a for a in c.get("args", []) if a.startswith("--reward-url")]
want_reward = ["--reward-url-allow=http://reward.scoring:8000"] if mode == "full" else []
check(reward == want_reward, "reward flags %s, expected %s" % (reward, want_reward))
# The pod policy (podPolicy values): restricted and default-deny unless the values say otherwise.
policy = [a for a in c.get("args", []) if a.startswith(("--pod-policy-", "--pod-security"))]
want_policy = ["--pod-security=baseline", "--pod-policy-allow=nodeName",
               "--pod-policy-allow=controlPlaneTolerations",
               "--pod-policy-service-account=trainer-reader",
               "--pod-policy-priority-class=research-high"] if mode == "full" else [
                   "--pod-security=restricted"]
check(policy == want_policy, "pod policy flags %s, expected %s" % (policy, want_policy))
# Each job's NetworkPolicy: on unless the values turn it off; metrics from the listed namespaces.
netpol = [a for a in c.get("args", []) if a.startswith(("--job-network-policy",
                                                        "--network-policy-"))]
want_netpol = {"default": ["--job-network-policy=true"],
               "full": ["--job-network-policy=true",
                        "--network-policy-metrics-from=kubernetes.io/metadata.name=monitoring"],
               "namespaced": ["--job-network-policy=false"]}[mode]
check(netpol == want_netpol, "network policy flags %s, expected %s" % (netpol, want_netpol))
release_ns = dep["metadata"]["namespace"]
check(flags.get("--metrics-port") == str(ports.get("metrics")),
      "--metrics-port=%s does not match the container port metrics=%s" % (
          flags.get("--metrics-port"), ports.get("metrics")))
check(flags.get("--leader-election-namespace") == release_ns,
      "the Lease must live in the release namespace %s (the Role is there), not %s" % (
          release_ns, flags.get("--leader-election-namespace")))
check(flags.get("--runtime-image", "").startswith("tlt:") or mode == "full",
      "default --runtime-image is not the tlt image: %s" % flags.get("--runtime-image"))
if mode == "namespaced":
    check(bool(flags.get("--namespace")), "watchNamespace set but no --namespace flag")
check("--leader-elect" in flags, "leader election is not on")
image = c["image"]
if mode == "default":
    check(image == "tlt-operator:%s" % chart["appVersion"],
          "default image %s is not tlt-operator:<appVersion %s>" % (image, chart["appVersion"]))
sa_name = pod["spec"].get("serviceAccountName")
check(bool(sa_name), "no serviceAccountName")
pod_labels = pod["metadata"]["labels"]
sel = dep["spec"]["selector"]["matchLabels"]
check(all(pod_labels.get(k) == v for k, v in sel.items()), "selector %s misses the pod" % sel)

# ---- Service and monitors -----------------------------------------------------------------------
svc = by_kind["Service"][0]
check(all(pod_labels.get(k) == v for k, v in svc["spec"]["selector"].items()),
      "the Service selects no operator pod: %s" % svc["spec"]["selector"])
(sp,) = svc["spec"]["ports"]
check(sp["name"] == "metrics" and sp["targetPort"] in ports,
      "Service port must be named metrics and target a container port: %s" % sp)
if mode == "full":
    sm = by_kind["ServiceMonitor"][0]["spec"]
    svc_labels = svc["metadata"]["labels"]
    check(all(svc_labels.get(k) == v for k, v in sm["selector"]["matchLabels"].items()),
          "the ServiceMonitor selects no Service: %s" % sm["selector"])
    check(sm["namespaceSelector"] == {"matchNames": [release_ns]},
          "the ServiceMonitor looks in %s, not the release namespace" % sm["namespaceSelector"])
    check([e["port"] for e in sm["endpoints"]] == ["metrics"], "ServiceMonitor port not metrics")
    check(all(e.get("honorLabels") is True for e in sm["endpoints"]),
          "ServiceMonitor without honorLabels: true")
    pm = by_kind["PodMonitor"][0]["spec"]
    check(all(e.get("honorLabels") is True for e in pm["podMetricsEndpoints"]),
          "PodMonitor without honorLabels: true (the runtime's job label would be renamed)")
    check("tlt.dev/job" in json.dumps(pm["selector"]), "PodMonitor does not select tlt.dev/job")

# ---- RBAC ----------------------------------------------------------------------------------------
roles = {(r["kind"], r["metadata"]["name"]): r for k in ("ClusterRole", "Role")
         for r in by_kind.get(k, [])}
for (kind, rname), role in roles.items():
    for rule in role["rules"]:
        for field in ("apiGroups", "resources", "verbs"):
            check("*" not in rule.get(field, []), "%s rule with a wildcard: %s" % (kind, rule))
        if "secrets" in rule.get("resources", []):
            check(rule["resources"] == ["secrets"] and
                  not {"update", "deletecollection"} & set(rule.get("verbs", [])),
                  "%s grants secrets beyond what the jobs' own Secrets need: %s" % (kind, rule))


def triples(role):
    return {(g, r, v) for rule in role["rules"] for g in rule.get("apiGroups", [])
            for r in rule.get("resources", []) for v in rule.get("verbs", [])}


op_rbac = [d for d in yaml.safe_load_all(open(os.path.join(src, "tests", "operator", "rbac.yaml")))
           if d]
op_jobs = [triples(d) for d in op_rbac
           if d["kind"] == "ClusterRole" and not d["metadata"]["name"].endswith("-kueue")]
op_kueue = [triples(d) for d in op_rbac if d["metadata"]["name"].endswith("-kueue") and
            d["kind"] == "ClusterRole"]
op_lease = [triples(d) for d in op_rbac if d["kind"] == "Role"]
jobs_kind = "Role" if mode == "namespaced" else "ClusterRole"
ours_jobs = [triples(r) for (k, n), r in roles.items()
             if k == jobs_kind and not n.endswith("-leader-election") and not n.endswith("-kueue")]
ours_kueue = [triples(r) for (k, n), r in roles.items() if n.endswith("-kueue")]
for (k, n), r in roles.items():
    for rule in r["rules"]:
        check(not {"escalate", "bind", "impersonate"} & set(rule.get("verbs", [])),
              "%s %s grants escalate, bind or impersonate: %s" % (k, n, rule))
ours_lease = [triples(r) for (k, n), r in roles.items() if n.endswith("-leader-election")]
checked = [("jobs", ours_jobs, op_jobs), ("leader election", ours_lease, op_lease)]
if mode == "full":
    checked.append(("kueue", ours_kueue, op_kueue))
else:
    check(not ours_kueue, "a Kueue role without kueue.enabled")
for what, ours, theirs in checked:
    if check(len(ours) == 1 and len(theirs) == 1, "%s: want one role each in the chart and in "
             "tests/operator/rbac.yaml, got %d and %d" % (what, len(ours), len(theirs))):
        check(ours[0] == theirs[0], "%s RBAC differs from tests/operator/rbac.yaml (what the real "
              "operator runs with): the chart lacks %s; it grants more: %s" % (
                  what, sorted(theirs[0] - ours[0]), sorted(ours[0] - theirs[0])))
for kind in ("ClusterRoleBinding", "RoleBinding"):
    for b in by_kind.get(kind, []):
        check(b["subjects"] == [{"kind": "ServiceAccount", "name": sa_name,
                                 "namespace": release_ns}],
              "%s subjects %s are not the operator's ServiceAccount" % (kind, b["subjects"]))
        ref = (b["roleRef"]["kind"], b["roleRef"]["name"])
        check(ref in roles and roles[ref]["metadata"].get("namespace") ==
              b["metadata"].get("namespace"),
              "%s %s binds %s, not a role of the chart in its namespace" % (
                  kind, b["metadata"]["name"], ref))

# ---- dashboards ----------------------------------------------------------------------------------
seen = []
for cm in by_kind.get("ConfigMap", []):
    check(cm["metadata"]["labels"].get("grafana_dashboard") == "1",
          "ConfigMap %s lacks grafana_dashboard: \"1\"" % cm["metadata"]["name"])
    for key, text in cm["data"].items():
        seen.append(key)
        path = os.path.join(src, "dashboards", key)
        check(os.path.exists(path) and open(path).read().rstrip("\n") == text.rstrip("\n"),
              "ConfigMap %s key %s is not dashboards/%s" % (cm["metadata"]["name"], key, key))
        json.loads(text)
if mode == "full":
    check(sorted(seen) == [os.path.basename(d) for d in dashboards],
          "dashboards in ConfigMaps %s, in dashboards/ %s" % (sorted(seen), dashboards))

print("%s: %d objects %s: %s" % (mode, len(docs), kinds, "FAIL" if failures else "ok"))
sys.exit(1 if failures else 0)
