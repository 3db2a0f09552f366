#!/usr/bin/env python3
"""Every runtime panel of tlt's dashboards on data scraped from real runs (tlt_run_scrape.sh).

For each dashboards/*.json panel target whose query reads runtime metrics (not tlt_operator_*),
substitutes the template variables as Grafana would with namespace=local and job=All (a regex
of the runs' job names), runs it as a range query over [START, END] at a 1 s step, and fails
unless some series has a finite value. Then reads the reclamation dashboard's stat panel
"Reclaimed share of idle GPU time" as an instant query at END over the whole range and compares
it with the RL run's own report (reclaimedShare in REPORT_JSON): they must agree within 0.02
when Prometheus scraped the run from before its first step (else with the share of the part it
scraped), and the counters' last scraped values must equal the report's totals.
Usage: check_run_data.py PROMETHEUS_URL SOURCE_DIR START END REPORT_JSON
"""
import glob
import json
import math
import os
import re
import sys
import urllib.error
import urllib.parse
import urllib.request

prom, src, start, end, report_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


def api(path, params):
    url = prom + path + "?" + urllib.parse.urlencode(params)
    try:
        with urllib.request.urlopen(url, timeout=20) as r:
            return json.load(r)
    except urllib.error.HTTPError as e:
        return json.load(e)


RUN_JOBS = "rl-e2e|tst-e2e"


def substitute(expr, job=RUN_JOBS):
    values = {"namespace": "local", "job": job, "__rate_interval": "4s",
              "__range": "%ds" % (end - start), "__interval": "1s"}
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: values[m.group(1) or m.group(2)], expr)


def finite_points(result):
    n = 0
    for series in result:
        for _, v in series.get("values", []) + ([series["value"]] if "value" in series else []):
            if math.isfinite(float(v)):
                n += 1
    return n


n_checked = 0
for path in sorted(glob.glob(os.path.join(src, "dashboards", "*.json"))):
    d = json.load(open(path))
    for panel in d.get("panels", []):
        for t in panel.get("targets", []):
            expr = t.get("expr", "")
            if not expr or "tlt_operator_" in expr:
                continue
            q = substitute(expr)
            r = api("/api/v1/query_range", {"query": q, "start": start, "end": end, "step": 1})
            where = "%s: panel %r" % (d["title"], panel["title"])
            if r.get("status") != "success":
                fail("%s: %s: %s" % (where, r.get("error"), q))
                continue
            n = finite_points(r["data"]["result"])
            n_checked += 1
            if n == 0:
                fail("%s: no data: %s" % (where, q))
            else:
                print("ok %-40s %-45s %5d points" % (d["title"][:40], panel["title"][:45], n))

# The reclaimed share as the dashboard shows it vs the run's report.
report = json.load(open(report_path))
want = report["reclaimedShare"]
dash = json.load(open(os.path.join(src, "dashboards", "tlt-idle-gpu-reclamation.json")))
stat = [p for p in dash["panels"] if p["title"] == "Reclaimed share of idle GPU time"]
if len(stat) != 1:
    fail("the reclamation dashboard has no panel 'Reclaimed share of idle GPU time'")
else:
    q = substitute(stat[0]["targets"][0]["expr"], job="rl-e2e")
    r = api("/api/v1/query", {"query": q, "time": end})
    res = r.get("data", {}).get("result", [])
    if r.get("status") != "success" or not res:
        fail("reclaimed share: no answer: %s" % r)
    else:
        got = float(res[0]["value"][1])
        # The counters as scraped: first and last sample of each (one series each: one run).
        first, last = {}, {}
        for name in ("tlt_reclaimed_seconds_total", "tlt_idle_seconds_total"):
            rr = api("/api/v1/query", {"query": '%s{job="rl-e2e"}[%ds]' % (name, end - start + 1),
                                       "time": end})
            series = rr.get("data", {}).get("result", [])
            if len(series) != 1:
                fail("%s: expected one series from the RL run, got %d" % (name, len(series)))
                first[name] = last[name] = float("nan")
                continue
            v = series[0]["values"]
            first[name], last[name] = float(v[0][1]), float(v[-1][1])
            print("%s: %d samples, first %.3f at +%.1f s, last %.3f at +%.1f s" % (
                name, len(v), first[name], v[0][0] - start, last[name], v[-1][0] - start))
        r_name, i_name = "tlt_reclaimed_seconds_total", "tlt_idle_seconds_total"
        print("reclaimed share of idle GPU time: dashboard %.4f, report %.4f (idle %.2f s, "
              "reclaimed %.2f s worker-time)" % (got, want, report["idleWorkerSeconds"],
                                                 report["reclaimedWorkerSeconds"]))
        if not 0.02 < want < 0.98:
            fail("the run's reclaimed share %.4f is not strictly between 0 and 1: the "
                 "comparison would prove little" % want)
        # The run waits for a final scrape, so Prometheus ends on the report's totals.
        for name, key in ((r_name, "reclaimedWorkerSeconds"), (i_name, "idleWorkerSeconds")):
            if not abs(last[name] - report[key]) <= 0.01:
                fail("%s: last scraped %.3f, the report's total %.3f: the final scrape was missed"
                     % (name, last[name], report[key]))
        if first[r_name] == 0 and first[i_name] == 0:
            # Prometheus saw the run from before its first step: the dashboard's increase()
            # covers all of it and must show the report's share.
            if not abs(got - want) <= 0.02:
                fail("reclaimed share on the dashboard %.4f differs from the report's %.4f"
                     % (got, want))
        else:
            # The first scrape came after the first steps (a loaded machine): no query can see
            # what was never scraped, so the dashboard must match what was.
            dr, di = last[r_name] - first[r_name], last[i_name] - first[i_name]
            seen = dr / (dr + di) if dr + di > 0 else float("nan")
            print("Prometheus missed the run's first steps; the scraped part's share is %.4f"
                  % seen)
            if not abs(got - seen) <= 0.02:
                fail("reclaimed share on the dashboard %.4f differs from the scraped part's %.4f"
                     % (got, seen))
if n_checked < 30:
    fail("only %d runtime panel queries checked" % n_checked)
print("%d runtime panel queries checked; %d failures" % (n_checked, len(failures)))
sys.exit(1 if failures else 0)
