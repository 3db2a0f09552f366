#!/usr/bin/env python3
"""Checks tlt's Grafana dashboards against a real Prometheus (run by dashboards.sh).

For every dashboards/*.json:
  1. conventions: a `datasource` variable of type datasource; a `job` query variable from
     label_values(); every data source reference is {"uid": "${datasource}"} (no hard-coded
     uids); unique panel ids inside the 24-column grid; every range selector is
     [$__rate_interval] or [$__range] (no hard-coded windows);
  2. every metric name in every query is exported: a family in the exposition of the real
     runtime exporter (metrics_demo, RuntimeMetrics), a "tlt_..." name in operator/ sources, or
     a name in operator_metrics_pending.txt (which must not list a name operator/ exports);
  3. every panel query and every variable query, with the template variables substituted as
     Grafana would (namespace and job: the exporter's), is sent to Prometheus's HTTP API; a
     parse or evaluation error fails; a query over runtime metrics must return data (the
     exporter serves every runtime family); a query over pending operator metrics can only be
     checked for validity, and is reported as such.
Exit 0 if all hold, 1 otherwise (every failure is printed first).
Usage: check_dashboards.py PROMETHEUS_URL EXPOSITION_FILE SOURCE_DIR NAMESPACE JOB
  (NAMESPACE, JOB: the labels of the exporter's series in that Prometheus)
"""
import glob
import json
import os
import re
import sys
import urllib.parse
import urllib.request

prom, exposition_file, src, demo_namespace, demo_job = sys.argv[1:6]
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


def api(path, params):
    url = prom + path + "?" + urllib.parse.urlencode(params, doseq=True)
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.load(r)
    except urllib.error.HTTPError as e:  # 400/422: a parse or evaluation error, with a body
        return json.load(e)


# ---- what is exported -----------------------------------------------------------------------------
exported = set(re.findall(r"^# TYPE (\S+) \S+$", open(exposition_file).read(), re.M))
if not any(n.startswith("tlt_") for n in exported):
    fail("the exposition of the runtime exporter has no tlt_ family; is it the right file?")
operator_names = set()
for path in glob.glob(os.path.join(src, "operator", "**", "*.*"), recursive=True):
    if path.endswith((".cc", ".h")):
        operator_names |= set(re.findall(r'"(tlt_[a-z0-9_]+)"', open(path).read()))
pending = set()
for line in open(os.path.join(src, "tests", "dashboards", "operator_metrics_pending.txt")):
    name = line.split("#")[0].strip()
    if name:
        pending.add(name)
for name in sorted(pending & (operator_names | exported)):
    fail("%s is exported now: delete it from tests/dashboards/operator_metrics_pending.txt" % name)
known = exported | operator_names | pending
print("exported by the runtime exporter: %d tlt_ families; in operator/ sources: %d; pending "
      "operator names: %d" % (len([n for n in exported if n.startswith("tlt_")]),
                              len(operator_names), len(pending)))

# ---- PromQL helpers ---------------------------------------------------------------------------------
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless",
            "bool", "offset", "inf", "nan",
            # aggregation operators, which may be followed by `by (...)` instead of `(`
            "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
            "bottomk", "topk", "quantile"}


def metric_names(expr):
    """Metric names in a PromQL expression: identifiers that are not functions (followed by
    '('), keywords, label names (inside {} or a by/on list) or numbers."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)              # string literals
    e = re.sub(r"\{[^}]*\}", "{}", e)                          # label matchers
    e = re.sub(r"\[[^\]]*\]", "[]", e)                         # range and subquery windows
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", r"\1", e)
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", e):
        word, rest = m.group(0), e[m.end():].lstrip()
        if word.lower() in KEYWORDS or rest.startswith("("):
            continue
        names.add(word)
    return names


def family(name):
    """The family a series name belongs to (histogram series -> the histogram)."""
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix) and name[: -len(suffix)] in known:
            return name[: -len(suffix)]
    return name


VALUES = {"namespace": demo_namespace, "job": demo_job, "__rate_interval": "1m", "__range": "5m",
          "__interval": "15s"}


def substitute(expr):
    def one(m):
        name = m.group(1) or m.group(2)
        if name not in VALUES:
            fail("unknown template variable $%s in: %s" % (name, expr))
            return m.group(0)
        return VALUES[name]
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", one, expr)


# ---- the harness must catch a broken query ----------------------------------------------------------
broken = api("/api/v1/query", {"query": "sum by (job) (rate(tlt_rl_step[1m])"})
if broken.get("status") != "error" or broken.get("errorType") != "bad_data":
    fail("Prometheus accepted a query with a missing parenthesis: %s" % broken)

# ---- the dashboards --------------------------------------------------------------------------------
paths = sorted(glob.glob(os.path.join(src, "dashboards", "*.json")))
if len(paths) < 5:
    fail("expected the 5 dashboards in dashboards/, found %d" % len(paths))
n_queries = n_data = n_parse_only = 0
for path in paths:
    name = os.path.basename(path)
    try:
        d = json.load(open(path))
    except ValueError as e:
        fail("%s: not JSON: %s" % (name, e))
        continue

    # 1. conventions
    variables = {v["name"]: v for v in d.get("templating", {}).get("list", [])}
    ds = variables.get("datasource", {})
    if ds.get("type") != "datasource" or ds.get("query") != "prometheus":
        fail("%s: no `datasource` variable of type datasource for prometheus" % name)
    job = variables.get("job", {})
    if job.get("type") != "query" or "label_values(" not in json.dumps(job.get("query")):
        fail("%s: no `job` query variable from label_values()" % name)

    def walk(node, where):
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "datasource" and isinstance(v, dict) and v.get("uid") != "${datasource}":
                    fail("%s: %s: data source %s is not ${datasource}" % (name, where, v))
                if k == "uid" and where != "" and v != "${datasource}":
                    fail("%s: %s: hard-coded uid %r" % (name, where, v))
                walk(v, where + "/" + k)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, "%s[%d]" % (where, i))
    walk(d, "")

    panels = d.get("panels", [])
    ids = [p.get("id") for p in panels]
    if len(ids) != len(set(ids)) or None in ids:
        fail("%s: panel ids missing or repeated: %s" % (name, ids))
    for p in panels:
        g = p.get("gridPos", {})
        if not (0 <= g.get("x", -1) and g.get("w", 0) > 0 and g["x"] + g["w"] <= 24):
            fail("%s: panel %r: gridPos %s outside the 24-column grid" % (name, p.get("title"), g))

    # 2 and 3: every query
    queries = []  # (where, expr, is a variable's label_values)
    for p in panels:
        for t in p.get("targets", []):
            queries.append(("panel %r %s" % (p.get("title"), t.get("refId")), t.get("expr", ""),
                            False))
    for v in variables.values():
        if v.get("type") == "query":
            q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            queries.append(("variable $%s" % v["name"], q, True))
    for where, expr, is_var in queries:
        n_queries += 1
        if not expr.strip():
            fail("%s: %s: empty query" % (name, where))
            continue
        for window in re.findall(r"\[([^\]]*)\]", expr):
            if window not in ("$__rate_interval", "$__range"):
                fail("%s: %s: window [%s]: use $__rate_interval or $__range" % (name, where,
                                                                                window))
        q = substitute(expr)
        if is_var:
            m = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\)\s*", q)
            if not m:
                fail("%s: %s: not label_values(SELECTOR, LABEL): %s" % (name, where, q))
                continue
            selector, label = m.group(1), m.group(2)
            names = metric_names(selector)
        else:
            names = metric_names(q)
        fams = {family(n) for n in names}
        unknown = sorted(f for f in fams if f not in known)
        if unknown:
            fail("%s: %s: metric(s) %s are not exported by the runtime or the operator, nor "
                 "listed as pending: %s" % (name, where, unknown, expr))
        if not fams:
            fail("%s: %s: no metric name found in: %s" % (name, where, expr))
        runtime_only = fams and fams <= exported
        if is_var:
            r = api("/api/v1/label/%s/values" % label, {"match[]": selector})
            if r.get("status") != "success":
                fail("%s: %s: Prometheus refused %s: %s" % (name, where, q, r.get("error")))
                continue
            values = r["data"]
            want = VALUES.get(label)
            if runtime_only and want not in values:
                fail("%s: %s: %s gave %s, without %s" % (name, where, q, values, want))
        else:
            r = api("/api/v1/query", {"query": q})
            if r.get("status") != "success":
                fail("%s: %s: Prometheus refused the query (%s: %s): %s" % (
                    name, where, r.get("errorType"), r.get("error"), q))
                continue
            values = r["data"]["result"]
        if runtime_only:
            if not values:
                fail("%s: %s: no data from the runtime exporter: %s" % (name, where, q))
                continue
            n_data += 1
        else:
            n_parse_only += 1
            kind = "pending, not exported yet" if fams & pending else "operator, not served here"
            print("valid, no data (%s: %s): %s: %s" % (kind, ", ".join(sorted(fams - exported)),
                                                       name, where))
    print("%s: %d panels, %d queries" % (name, len(panels), len(queries)))

print("%d queries: %d returned data from the runtime exporter, %d over operator metrics were "
      "only checked for validity (no operator serves them in this test)" % (
          n_queries, n_data, n_parse_only))
if failures:
    print("FAIL: %d problem(s) in the dashboards" % len(failures))
    sys.exit(1)
