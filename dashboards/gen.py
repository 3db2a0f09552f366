#!/usr/bin/env python3
"""Writes tlt's Grafana dashboards, dashboards/*.json (helm/tlt/dashboards links here).

The JSON files are generated so that every dashboard follows the same conventions and a change
is one edit here, not five hand-edited JSON files. Conventions (those of the Grafana community
mixins):
  - a `datasource` variable (type datasource, Prometheus); every panel and query uses
    {"type": "prometheus", "uid": "${datasource}"}: no hard-coded data source uid;
  - `namespace` and `job` variables from label_values(); `job` is the tlt job's name, the `job`
    label the runtime puts on every series (scraped with honor_labels: true);
  - rates over $__rate_interval, totals over $__range; no hard-coded ranges.
What it leaves out: alerts, and panels for metrics nobody exports (e.g. response-length
percentiles: the runtime has no such histogram yet).

Metric names come from DESIGN.md section 5 (runtime, runtime/metrics/metrics.h) and from
operator/controller/metrics.h; the rebalancer's, not exported yet, are proposed in
tests/dashboards/operator_metrics_pending.txt;
tests/dashboards/dashboards.sh checks every name and runs every query on a real Prometheus.

Usage: dashboards/gen.py            # (re)write the JSON files
       dashboards/gen.py --check    # exit 1 if a JSON file differs from what would be written
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_DIRS = [HERE]
DS = {"type": "prometheus", "uid": "${datasource}"}

# Selectors. RUN: a runtime series of the chosen jobs.
RUN = 'namespace=~"$namespace", job=~"$job"'


def sel(extra=""):
    return "{" + RUN + (", " + extra if extra else "") + "}"


# ---- variables ------------------------------------------------------------------------------

def datasource_var():
    return {"name": "datasource", "label": "Data source", "type": "datasource",
            "query": "prometheus", "current": {}, "hide": 0, "includeAll": False,
            "multi": False, "refresh": 1, "regex": "", "options": []}


def query_var(name, label, query):
    return {"name": name, "label": label, "type": "query", "datasource": DS,
            "query": {"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
            "definition": query, "current": {}, "hide": 0, "includeAll": True, "multi": True,
            "allValue": ".*", "refresh": 2, "regex": "", "sort": 1, "options": []}


def job_vars(anchor):
    """namespace and job variables from the label values of metric `anchor`."""
    return [
        query_var("namespace", "Namespace", "label_values(%s, namespace)" % anchor),
        query_var("job", "Job", 'label_values(%s{namespace=~"$namespace"}, job)' % anchor),
    ]


# ---- panels -----------------------------------------------------------------------------------

def target(expr, legend="", ref="A", instant=False):
    t = {"refId": ref, "datasource": DS, "expr": expr, "legendFormat": legend or "__auto"}
    if instant:
        t.update({"instant": True, "range": False})
    else:
        t.update({"range": True})
    return t


def targets(queries, instant=False):
    return [target(e, l, chr(ord("A") + i), instant) for i, (e, l) in enumerate(queries)]


def timeseries(title, desc, queries, unit="short", w=12, h=8, stack=False, minv=None,
               maxv=None, thresholds=None):
    custom = {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 30 if stack else 10,
              "showPoints": "never", "spanNulls": False,
              "stacking": {"mode": "normal" if stack else "none", "group": "A"}}
    defaults = {"unit": unit, "custom": custom}
    if minv is not None:
        defaults["min"] = minv
    if maxv is not None:
        defaults["max"] = maxv
    if thresholds:
        custom["thresholdsStyle"] = {"mode": "line+area"}
        defaults["thresholds"] = {"mode": "absolute", "steps": thresholds}
    return {"type": "timeseries", "title": title, "description": desc, "datasource": DS,
            "targets": targets(queries), "fieldConfig": {"defaults": defaults, "overrides": []},
            "options": {"legend": {"displayMode": "list", "placement": "bottom",
                                   "showLegend": True, "calcs": []},
                        "tooltip": {"mode": "multi", "sort": "desc"}},
            "_w": w, "_h": h}


def stat(title, desc, queries, unit="short", w=6, h=4, decimals=None, mappings=None):
    defaults = {"unit": unit, "color": {"mode": "thresholds"},
                "thresholds": {"mode": "absolute", "steps": [{"color": "blue", "value": None}]}}
    if decimals is not None:
        defaults["decimals"] = decimals
    if mappings:
        defaults["mappings"] = mappings
    return {"type": "stat", "title": title, "description": desc, "datasource": DS,
            "targets": targets(queries, instant=True),
            "fieldConfig": {"defaults": defaults, "overrides": []},
            "options": {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                        "colorMode": "value", "graphMode": "none", "textMode": "auto",
                        "justifyMode": "auto", "orientation": "auto"},
            "_w": w, "_h": h}


def state_timeline(title, desc, queries, mappings, w=24, h=8):
    return {"type": "state-timeline", "title": title, "description": desc, "datasource": DS,
            "targets": targets(queries),
            "fieldConfig": {"defaults": {"mappings": mappings, "color": {"mode": "thresholds"},
                                         "thresholds": {"mode": "absolute", "steps": [
                                             {"color": "green", "value": None}]},
                                         "custom": {"fillOpacity": 80, "lineWidth": 0}},
                            "overrides": []},
            "options": {"showValue": "never", "mergeValues": True, "rowHeight": 0.9,
                        "alignValue": "left", "legend": {"showLegend": True,
                                                         "displayMode": "list",
                                                         "placement": "bottom"},
                        "tooltip": {"mode": "single", "sort": "none"}},
            "_w": w, "_h": h}


def bargauge(title, desc, queries, unit="short", w=12, h=8):
    return {"type": "bargauge", "title": title, "description": desc, "datasource": DS,
            "targets": targets(queries, instant=True),
            "fieldConfig": {"defaults": {"unit": unit, "color": {"mode": "palette-classic"},
                                         "thresholds": {"mode": "absolute", "steps": [
                                             {"color": "blue", "value": None}]}},
                            "overrides": []},
            "options": {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                        "orientation": "horizontal", "displayMode": "gradient",
                        "showUnfilled": True},
            "_w": w, "_h": h}


def value_map(names):
    """Grafana value mappings {0: name0, 1: name1, ...}."""
    return [{"type": "value", "options": {str(i): {"text": n, "index": i}
                                          for i, n in enumerate(names)}}]


def layout(rows):
    """rows: [(row title, [panel, ...]), ...] -> Grafana panels with ids and gridPos."""
    out, pid, y = [], 1, 0
    for title, panels in rows:
        out.append({"type": "row", "title": title, "id": pid, "collapsed": False, "panels": [],
                    "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}})
        pid, y, x, row_h = pid + 1, y + 1, 0, 0
        for p in panels:
            w, h = p.pop("_w"), p.pop("_h")
            if x + w > 24:
                x, y, row_h = 0, y + row_h, 0
            p["id"] = pid
            p["gridPos"] = {"h": h, "w": w, "x": x, "y": y}
            out.append(p)
            pid, x, row_h = pid + 1, x + w, max(row_h, h)
        y += row_h
    return out


def dashboard(uid, title, desc, variables, rows):
    return {"uid": uid, "title": title, "description": desc, "tags": ["tlt"],
            "editable": True, "graphTooltip": 1, "timezone": "", "refresh": "30s",
            "schemaVersion": 39, "version": 1, "time": {"from": "now-3h", "to": "now"},
            "timepicker": {}, "fiscalYearStartMonth": 0, "liveNow": False,
            "links": [{"type": "dashboards", "tags": ["tlt"], "asDropdown": True,
                       "title": "tlt dashboards", "includeVars": True, "keepTime": True,
                       "icon": "external link", "targetBlank": False, "tooltip": "", "url": ""}],
            "annotations": {"list": []},
            "templating": {"list": [datasource_var()] + variables},
            "panels": layout(rows)}


# ---- shared expressions -------------------------------------------------------------------------

def rate(metric, by="job", extra=""):
    return "sum by (%s) (rate(%s%s[$__rate_interval]))" % (by, metric, sel(extra))


def increase_total(metric):
    return "sum(increase(%s%s[$__range]))" % (metric, sel())


RECLAIMED_SHARE = ("{r} / ({r} + {i})".format(r=rate("tlt_reclaimed_seconds_total"),
                                              i=rate("tlt_idle_seconds_total")))
RECLAIMED_SHARE_RANGE = ("{r} / ({r} + {i})".format(r=increase_total("tlt_reclaimed_seconds_total"),
                                                    i=increase_total("tlt_idle_seconds_total")))
ACCEPT_QUANTILE = ("histogram_quantile(%s, sum by (job, le) "
                   "(rate(tlt_spec_accept_length_bucket" + sel() + "[$__rate_interval])))")
ACCEPT_MEAN = ("sum by (job) (rate(tlt_spec_accept_length_sum{s}[$__rate_interval])) / "
               "sum by (job) (rate(tlt_spec_accept_length_count{s}[$__rate_interval]))"
               .format(s=sel()))
# Worker state per pod as one number: idle 0, generating 1, released 2, training 3.
WORKER_STATES = ["idle", "generating", "released", "training"]
WORKER_STATE_CODE = " + ".join(
    'sum by (job, pod) (tlt_worker_state%s) * %d' % (sel('state="%s"' % s), i)
    for i, s in enumerate(WORKER_STATES))
DECISIONS = ('sum by (job, action) (increase(tlt_operator_rebalancer_decisions_total'
             '{job=~"$job"}[$__rate_interval]))')


# ---- the dashboards -----------------------------------------------------------------------------

def reclamation():
    rows = [
        ("Idle GPU time reclaimed (whole time range)", [
            stat("Reclaimed share of idle GPU time",
                 "Of the worker-seconds rollout workers spent idle (released from rollouts), the "
                 "share spent training the drafter, over the dashboard's time range. Should "
                 "match the `reclaimed` line of the job's own report.",
                 [(RECLAIMED_SHARE_RANGE, "")], unit="percentunit", decimals=1),
            stat("Reclaimed GPU-hours", "Idle worker time spent training the drafter.",
                 [(increase_total("tlt_reclaimed_seconds_total") + " / 3600", "")],
                 unit="short", decimals=2),
            stat("Idle GPU-hours, not reclaimed",
                 "Worker time released from rollouts and not training: the waste left.",
                 [(increase_total("tlt_idle_seconds_total") + " / 3600", "")],
                 unit="short", decimals=2),
            stat("RL step", "Current RL step of each selected job.",
                 [("max by (job) (tlt_rl_step%s)" % sel(), "{{job}}")]),
        ]),
        ("Idle vs reclaimed", [
            timeseries("Idle vs reclaimed GPU-seconds per second",
                       "Worker-seconds per second: idle (released, not training) and reclaimed "
                       "(training the drafter), per job. Their sum is all idle rollout time.",
                       [(rate("tlt_idle_seconds_total"), "{{job}} idle"),
                        (rate("tlt_reclaimed_seconds_total"), "{{job}} reclaimed")],
                       unit="s", stack=True, minv=0),
            timeseries("Reclaimed share", "reclaimed / (reclaimed + idle), per job.",
                       [(RECLAIMED_SHARE, "{{job}}")], unit="percentunit", minv=0, maxv=1),
        ]),
        ("Workers", [
            timeseries("Workers by state",
                       "Rollout, trainer and drafter workers in each coordinator state.",
                       [("sum by (state) (tlt_worker_state%s)" % sel(), "{{state}}")],
                       unit="short", stack=True, minv=0),
            timeseries("GPU busy ratio per pod",
                       "tlt_gpu_busy_ratio: the fraction of time each pod's GPU was busy. The "
                       "rebalancer reassigns rollout pods below spec.rebalancing.idleBelow "
                       "(default 0.05, the red band).",
                       [("max by (job, pod) (tlt_gpu_busy_ratio%s)" % sel(), "{{job}}/{{pod}}")],
                       unit="percentunit", minv=0, maxv=1,
                       thresholds=[{"color": "red", "value": None},
                                   {"color": "transparent", "value": 0.05}]),
            state_timeline("Worker state per pod",
                           "Each worker's coordinator state over time.",
                           [(WORKER_STATE_CODE, "{{job}}/{{pod}}")], value_map(WORKER_STATES)),
        ]),
        ("Rebalancer (operator)", [
            timeseries("Rebalancer decisions",
                       "Reassignments the operator's rebalancer made per job, by action.",
                       [(DECISIONS, "{{job}} {{action}}")], unit="short", stack=True, minv=0,
                       w=24),
        ]),
        ("RL progress", [
            timeseries("RL step", "", [("max by (job) (tlt_rl_step%s)" % sel(), "{{job}}")]),
            timeseries("Mean reward", "Mean reward of the last step's rollouts.",
                       [("avg by (job) (tlt_rl_reward_mean%s)" % sel(), "{{job}}")]),
        ]),
    ]
    return dashboard("tlt-idle-gpu-reclamation", "tlt / Idle-GPU reclamation",
                     "Idle rollout-worker GPU time and how much of it drafter training reclaims.",
                     job_vars("tlt_rl_step"), rows)


def rollout():
    rows = [
        ("Generation", [
            timeseries("Active generation requests", "Requests in flight: the long tail shows "
                       "as a few requests left while most workers wait.",
                       [("sum by (job) (tlt_rollout_active_requests%s)" % sel(), "{{job}}")],
                       minv=0),
            timeseries("Rollout tokens per second", "",
                       [(rate("tlt_rollout_tokens_total"), "{{job}}")], minv=0),
        ]),
        ("Speculative decoding", [
            timeseries("Acceptance length (p50, p90, p99)",
                       "Tokens emitted per target verification step (accepted drafted tokens "
                       "plus the target's own).",
                       [(ACCEPT_QUANTILE % q, "{{job}} p%s" % q[2:].ljust(2, "0"))
                        for q in ("0.5", "0.9", "0.99")], minv=0),
            timeseries("Mean acceptance length", "", [(ACCEPT_MEAN, "{{job}}")], minv=0),
            timeseries("Speculative verification steps per second",
                       "Zero while speculation is off (too many active requests, below the "
                       "activation threshold, or no drafter yet).",
                       [(rate("tlt_spec_accept_length_count"), "{{job}}")], minv=0),
            timeseries("Arms chosen per second",
                       "Drafting arms (depth_topk_tokens) the bandit selector chose.",
                       [(rate("tlt_spec_arm_selected_total", by="arm"), "{{arm}}")],
                       stack=True, minv=0),
            bargauge("Arms chosen over the time range", "",
                     [("sum by (arm) (increase(tlt_spec_arm_selected_total%s[$__range]))"
                       % sel(), "{{arm}}")], w=24, h=6),
            bargauge("Generating worker-seconds by engine phase over the time range",
                     "Where the rollout engines' time went: plain steps, drafting, the "
                     "drafter's catch-up, verification, commit, hidden-state capture, the "
                     "bandit, prefill and the rest.",
                     [("sum by (phase) (increase(tlt_rollout_phase_seconds_total%s[$__range]))"
                       % sel(), "{{phase}}")], unit="s", w=24, h=6),
        ]),
    ]
    return dashboard("tlt-rollout", "tlt / Rollout long tail",
                     "Rollout generation: requests in flight, throughput, and adaptive "
                     "speculative decoding (acceptance length, arms chosen).",
                     job_vars("tlt_rl_step"), rows)


def drafter():
    rows = [
        ("Drafter", [
            stat("Drafter version", "Version of the drafter serving rollouts, per job.",
                 [("max by (job) (tlt_drafter_version%s)" % sel(), "{{job}}")], w=8),
            stat("Drafter train steps", "Drafter optimizer steps over the time range.",
                 [("sum by (job) (increase(tlt_drafter_train_steps_total%s[$__range]))" % sel(),
                   "{{job}}")], w=8, decimals=0),
            stat("Mean acceptance length", "Over the time range.",
                 [("sum(increase(tlt_spec_accept_length_sum{s}[$__range])) / "
                   "sum(increase(tlt_spec_accept_length_count{s}[$__range]))".format(s=sel()),
                   "")], w=8, decimals=2),
            timeseries("Drafter version", "",
                       [("max by (job) (tlt_drafter_version%s)" % sel(), "{{job}}")]),
            timeseries("Drafter loss", "Last drafter training loss.",
                       [("avg by (job) (tlt_drafter_loss%s)" % sel(), "{{job}}")]),
            timeseries("Drafter train steps per second", "",
                       [(rate("tlt_drafter_train_steps_total"), "{{job}}")], minv=0),
            timeseries("Mean acceptance length", "The drafter's quality as rollouts see it.",
                       [(ACCEPT_MEAN, "{{job}}")], minv=0),
            timeseries("Reclaimed GPU-seconds per second",
                       "Idle rollout time spent on drafter training.",
                       [(rate("tlt_reclaimed_seconds_total"), "{{job}}")], unit="s", minv=0,
                       w=24),
        ]),
    ]
    return dashboard("tlt-drafter", "tlt / Drafter",
                     "The speculative drafter: version, training loss and steps, acceptance.",
                     job_vars("tlt_drafter_version"), rows)


def tst():
    phases = ["baseline (next-token)", "superposition", "recovery"]
    rows = [
        ("Token-superposition training", [
            state_timeline("Phase", "0 baseline (next-token), 1 superposition, 2 recovery.",
                           [("max by (job) (tlt_tst_phase%s)" % sel(), "{{job}}")],
                           value_map(phases), h=5),
            timeseries("Loss", "Last TST training loss.",
                       [("avg by (job) (tlt_tst_loss%s)" % sel(), "{{job}}")]),
            timeseries("Training tokens per second", "",
                       [(rate("tlt_tokens_seen_total"), "{{job}}")], minv=0),
            timeseries("Training tokens seen", "",
                       [("sum by (job) (tlt_tokens_seen_total%s)" % sel(), "{{job}}")],
                       minv=0, w=24),
        ]),
    ]
    return dashboard("tlt-tst", "tlt / Token-superposition pretraining",
                     "TSTPretrainJob: phase, loss and training tokens.",
                     job_vars("tlt_tst_phase"), rows)


def operator():
    rows = [
        ("Reconcilers", [
            timeseries("Reconciles per second by result", "",
                       [("sum by (kind, result) (rate(tlt_operator_reconcile_total"
                         "[$__rate_interval]))", "{{kind}} {{result}}")], minv=0),
            timeseries("Reconcile latency (p50, p99)", "",
                       [("histogram_quantile(%s, sum by (kind, le) (rate("
                         "tlt_operator_reconcile_duration_seconds_bucket[$__rate_interval])))"
                         % q, "{{kind}} p%s" % q[2:].ljust(2, "0")) for q in ("0.5", "0.99")],
                       unit="s", minv=0),
            timeseries("Work-queue depth", "Job keys queued and ready for a worker.",
                       [("max(tlt_operator_workqueue_depth)", "depth")], minv=0),
            timeseries("Jobs by phase", "As last reconciled.",
                       [("sum by (kind, phase) (tlt_operator_jobs)", "{{kind}} {{phase}}")],
                       stack=True, minv=0),
            timeseries("Watch restarts per second",
                       "Watches that started over with a list (gone: 410; error: other).",
                       [("sum by (resource, reason) (rate(tlt_operator_watch_restarts_total"
                         "[$__rate_interval]))", "{{resource}} {{reason}}")], minv=0),
            timeseries("Leader", "1 for the replica holding the leader Lease.",
                       [("max by (pod) (tlt_operator_leader)", "{{pod}}")], minv=0, maxv=1),
        ]),
        ("Rebalancer", [
            timeseries("Rebalancer decisions", "Per job and action.",
                       [(DECISIONS, "{{job}} {{action}}")], stack=True, minv=0),
            timeseries("Prometheus query errors per second",
                       "Failed or unreadable utilisation queries; the rebalancer makes no "
                       "reassignment while they fail (condition RebalancerDegraded).",
                       [("sum(rate(tlt_operator_prometheus_query_errors_total"
                         "[$__rate_interval]))", "errors")], minv=0),
        ]),
    ]
    variables = [query_var("job", "Job",
                           "label_values(tlt_operator_rebalancer_decisions_total, job)")]
    return dashboard("tlt-operator", "tlt / Operator",
                     "The tlt operator: reconcile rates and latency, work queue, jobs by phase, "
                     "rebalancer decisions.", variables, rows)


DASHBOARDS = {"tlt-idle-gpu-reclamation.json": reclamation, "tlt-rollout.json": rollout,
              "tlt-drafter.json": drafter, "tlt-tst.json": tst, "tlt-operator.json": operator}


def main(argv):
    check = argv[1:] == ["--check"]
    if argv[1:] and not check:
        print(__doc__)
        return 2
    stale = []
    for name, make in DASHBOARDS.items():
        text = json.dumps(make(), indent=2, sort_keys=False) + "\n"
        for d in OUT_DIRS:
            path = os.path.normpath(os.path.join(d, name))
            old = open(path).read() if os.path.exists(path) else None
            if old == text:
                continue
            if check:
                stale.append(path)
            else:
                os.makedirs(d, exist_ok=True)
                with open(path, "w") as f:
                    f.write(text)
                print("wrote", path)
    if check:
        for d in OUT_DIRS:  # files no generator writes
            for f in sorted(os.listdir(d)):
                if f.endswith(".json") and f not in DASHBOARDS:
                    stale.append(os.path.normpath(os.path.join(d, f)) + " (not generated)")
        for s in stale:
            print("stale:", s)
        if stale:
            print("run dashboards/gen.py to rewrite them")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
