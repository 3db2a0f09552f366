#!/usr/bin/env python3
"""The measuring side of bench/operator.sh: watches, samples and reports. Standard library only.

  measure.py watch --server URL --token-file F --ca F --namespace NS --pods N [--jobs J]
                   [--metrics URL] [--pid PID] --timeout S --ready FILE --out FILE
      Lists and watches the pods (and, with --jobs, the RLJobs) of NS, recording when this
      process first saw each pod, each pod Running and each RLJob with status.phase Running
      (wall-clock seconds, time.time()). Samples VmHWM/VmRSS of --pid every 0.1 s and reads its
      CPU time (user + system), the load average and the apiserver's request counters
      (apiserver_request_total by verb: every client's requests) at the start and the end; scrapes
      --metrics once when the watches are up and once when everything is Running. Touches
      --ready once both watches are established (events from then on are not missed).
      Writes --out (JSON) and exits 0 when N pods (and J jobs) are Running; on --timeout or if
      --pid exits, writes what it saw, says so on stderr and exits 2.
  measure.py report --operator F --direct F --jobs J --pods N --parallel P
      Prints the side-by-side table, the ratio and PASS/MISS against the issue's goals.

What it leaves out: watch events are timed on arrival here, so every time includes this
process's own lag (small next to the seconds measured, but it runs on the same CPUs).
"""
import argparse
import json
import os
import ssl
import sys
import threading
import time
import urllib.parse
import urllib.request

GOAL_PODS_PER_S = 50.0
GOAL_RSS_MIB = 64.0


class Api:
    """GETs against the apiserver with a bearer token; raises on HTTP errors."""

    def __init__(self, server, token, ca):
        self.server, self.token = server, token
        self.ctx = ssl.create_default_context(cafile=ca)

    def get(self, path, timeout):
        req = urllib.request.Request(self.server + path, headers={
            "Authorization": "Bearer " + self.token, "Accept": "application/json"})
        return urllib.request.urlopen(req, context=self.ctx, timeout=timeout)


class Watch(threading.Thread):
    """List (paged) then watch one collection, relisting on 410 Gone; calls on_object(obj)."""

    def __init__(self, api, path, on_object, log):
        super().__init__(daemon=True)
        self.api, self.path, self.on_object, self.log = api, path, on_object, log
        self.ready = threading.Event()

    def list(self):
        cont, rv = "", ""
        while True:
            q = {"limit": "500"}
            if cont:
                q["continue"] = cont
            with self.api.get(self.path + "?" + urllib.parse.urlencode(q), 60) as r:
                body = json.load(r)
            for item in body.get("items") or []:
                self.on_object(item)
            rv = body["metadata"].get("resourceVersion", rv)
            cont = body["metadata"].get("continue", "")
            if not cont:
                return rv

    def watch(self, rv):
        """Returns the resourceVersion to resume from, or None to relist (410 Gone)."""
        q = urllib.parse.urlencode({"watch": "1", "resourceVersion": rv,
                                    "allowWatchBookmarks": "true", "timeoutSeconds": "30"})
        with self.api.get(self.path + "?" + q, 60) as r:
            self.ready.set()
            for line in r:
                ev = json.loads(line)
                obj = ev.get("object") or {}
                if ev.get("type") == "ERROR":
                    if obj.get("code") == 410:
                        return None
                    raise RuntimeError("watch error: %s" % obj.get("message"))
                rv = obj.get("metadata", {}).get("resourceVersion", rv)
                if ev.get("type") in ("ADDED", "MODIFIED"):
                    self.on_object(obj)
        return rv

    def run(self):
        while True:
            try:
                rv = self.list()
                while rv is not None:
                    rv = self.watch(rv)
            except Exception as e:  # a dropped connection: list again
                self.log("watch %s: %s; listing again" % (self.path, e))
                time.sleep(0.5)


class Seen:
    """First-seen times of pods, Running pods and Running jobs; guarded by mu."""

    def __init__(self):
        self.mu = threading.Lock()
        self.pod_added, self.pod_running, self.job_running, self.job_phase = {}, {}, {}, {}

    def on_pod(self, pod):
        now = time.time()
        meta = pod.get("metadata", {})
        if meta.get("deletionTimestamp"):
            return
        name = meta.get("name")
        with self.mu:
            self.pod_added.setdefault(name, now)
            if pod.get("status", {}).get("phase") == "Running":
                self.pod_running.setdefault(name, now)

    def on_job(self, job):
        now = time.time()
        name, phase = job["metadata"]["name"], job.get("status", {}).get("phase", "")
        with self.mu:
            self.job_phase[name] = phase
            if phase == "Running":
                self.job_running.setdefault(name, now)

    def counts(self):
        with self.mu:
            phases = {}
            for p in self.job_phase.values():
                phases[p or "(none)"] = phases.get(p or "(none)", 0) + 1
            return len(self.pod_added), len(self.pod_running), len(self.job_running), phases


def read_rss(pid):
    """(VmHWM, VmRSS) in KiB, or None once the process is gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            fields = dict(l.split(":", 1) for l in f if ":" in l)
        return int(fields["VmHWM"].split()[0]), int(fields["VmRSS"].split()[0])
    except (OSError, KeyError, ValueError):
        return None


def read_cpu_s(pid):
    """User + system CPU seconds of pid so far, or None once the process is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def scrape(url):
    """The operator's counters that the report uses, summed over labels; {} if unreachable."""
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            text = r.read().decode()
    except Exception:
        return {}
    out = {"reconciles": 0.0, "reconcile_errors": 0.0, "latency_sum": 0.0, "latency_count": 0.0}
    for line in text.splitlines():
        if line.startswith("#") or " " not in line:
            continue
        name, value = line.rsplit(" ", 1)
        v = float(value)
        if name.startswith("tlt_operator_reconcile_total{"):
            out["reconciles"] += v
            if 'result="error"' in name:
                out["reconcile_errors"] += v
        elif name.startswith("tlt_operator_reconcile_duration_seconds_sum"):
            out["latency_sum"] += v
        elif name.startswith("tlt_operator_reconcile_duration_seconds_count"):
            out["latency_count"] += v
    return out


def apiserver_requests(api):
    """apiserver_request_total summed by verb (watches left out), or {} if unreadable."""
    try:
        with api.get("/metrics", 30) as r:
            text = r.read().decode()
    except Exception:
        return {}
    out = {}
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels, value = line.rsplit(" ", 1)
        verb = labels.split('verb="', 1)[1].split('"', 1)[0] if 'verb="' in labels else "?"
        if verb != "WATCH":
            out[verb] = out.get(verb, 0) + float(value)
    return out


def watch_main(a):
    log = lambda m: print("measure[%s]: %s" % (a.namespace, m), file=sys.stderr, flush=True)
    with open(a.token_file) as f:
        api = Api(a.server, f.read().strip(), a.ca)
    seen = Seen()
    watches = [Watch(api, "/api/v1/namespaces/%s/pods" % a.namespace, seen.on_pod, log)]
    if a.jobs:
        watches.append(Watch(api, "/apis/tlt.dev/v1alpha1/namespaces/%s/rljobs" % a.namespace,
                             seen.on_job, log))
    for w in watches:
        w.start()
    t_start = time.time()
    for w in watches:
        if not w.ready.wait(max(1.0, a.timeout - (time.time() - t_start))):
            log("could not watch %s within %d s" % (w.path, a.timeout))
            return 2
    res = {"metrics_start": scrape(a.metrics) if a.metrics else {}, "t_watching": time.time()}
    rss0 = read_rss(a.pid) if a.pid else None
    res["rss_idle_kib"] = rss0[1] if rss0 else None
    res["cpu_start_s"] = read_cpu_s(a.pid) if a.pid else None
    res["load_start"] = os.getloadavg()[0]
    res["requests_start"] = apiserver_requests(api)
    open(a.ready, "w").close()
    hwm = rss_max = 0
    samples, done, why, t_progress = 0, False, "", time.time()
    while True:
        now = time.time()
        if a.pid:
            r = read_rss(a.pid)
            if r is None:
                why = "the operator (pid %d) exited" % a.pid
                break
            hwm, rss_max, samples = max(hwm, r[0]), max(rss_max, r[1]), samples + 1
        n_pods, n_run, n_jobs, phases = seen.counts()
        if n_pods >= a.pods and n_run >= a.pods and n_jobs >= a.jobs:
            done = True
            break
        if now - t_start > a.timeout:
            why = "timed out after %d s (bench/operator.sh --timeout)" % a.timeout
            break
        if now - t_progress >= 10:
            t_progress = now
            log("%d/%d pods exist, %d Running%s" % (n_pods, a.pods, n_run, (
                "; RLJob phases %s" % json.dumps(phases, sort_keys=True)) if a.jobs else ""))
        time.sleep(0.1)
    res["metrics_end"] = scrape(a.metrics) if a.metrics else {}
    res["t_end"] = time.time()
    res["cpu_end_s"] = read_cpu_s(a.pid) if a.pid else None
    res["load_end"] = os.getloadavg()[0]
    res["requests_end"] = apiserver_requests(api)
    with seen.mu:
        added, running, jobs = (list(seen.pod_added.values()), list(seen.pod_running.values()),
                                list(seen.job_running.values()))
    n_pods, n_run, n_jobs, phases = seen.counts()
    res.update(done=done, why=why, pods_added=n_pods, pods_running=n_run, jobs_running=n_jobs,
               job_phases=phases,
               first_pod=min(added) if added else None, last_pod=max(added) if added else None,
               last_pod_running=max(running) if running else None,
               last_job_running=max(jobs) if jobs else None,
               rss_hwm_kib=hwm or None, rss_max_kib=rss_max or None, rss_samples=samples)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    if not done:
        log("%s: %d/%d pods exist, %d Running%s" % (why, n_pods, a.pods, n_run, (
            ", %d/%d RLJobs Running (phases %s)" % (n_jobs, a.jobs, json.dumps(
                phases, sort_keys=True))) if a.jobs else ""))
        return 2
    return 0


def report_main(a):
    op, di = json.load(open(a.operator)), json.load(open(a.direct))
    t0_op, t0_di = float(open(a.operator_t0).read()), float(open(a.direct_t0).read())
    n = a.pods

    def rel(x, t0):
        return x - t0 if x is not None else None

    op_exist, di_exist = rel(op["last_pod"], t0_op), rel(di["last_pod"], t0_di)
    op_run, di_run = rel(op["last_pod_running"], t0_op), rel(di["last_pod_running"], t0_di)
    op_jobs = rel(op["last_job_running"], t0_op)
    op_rate, di_rate = n / op_exist, n / di_exist
    m0, m1 = op["metrics_start"], op["metrics_end"]
    t_m = op["t_end"] - t0_op
    reconciles = m1.get("reconciles", 0) - m0.get("reconciles", 0)
    errors = m1.get("reconcile_errors", 0) - m0.get("reconcile_errors", 0)
    lat_n = m1.get("latency_count", 0) - m0.get("latency_count", 0)
    lat = (m1.get("latency_sum", 0) - m0.get("latency_sum", 0)) / lat_n if lat_n else float("nan")
    hwm_mib = op["rss_hwm_kib"] / 1024
    idle_mib = (op["rss_idle_kib"] or 0) / 1024
    fmt = "  %-50s %12s %15s"
    f = lambda x, p=1: "-" if x is None else "%.*f" % (p, x)
    print("bench/operator: %d RLJobs x 5 pods = %d pods; %d parallel kubectl clients each side;"
          " %d CPUs, load %.2f" % (a.jobs, n, a.parallel, os.cpu_count(), os.getloadavg()[0]))
    print(fmt % ("", "operator", "direct kubectl"))
    print(fmt % ("client wall time (s): apply RLJobs / create pods", f(a.op_client_s),
                 f(a.di_client_s)))
    print(fmt % ("first pod exists (s)", f(rel(op["first_pod"], t0_op), 2),
                 f(rel(di["first_pod"], t0_di), 2)))
    print(fmt % ("every pod exists (s)", f(op_exist, 2), f(di_exist, 2)))
    print(fmt % ("pods created per second", f(op_rate), f(di_rate)))
    print(fmt % ("every pod Running (kwok) (s)", f(op_run, 2), f(di_run, 2)))
    print(fmt % ("every RLJob status.phase Running (s)", f(op_jobs, 2), "-"))
    print(fmt % ("reconciles per second (to all Running)", f(reconciles / t_m), "-"))
    print(fmt % ("  reconciles / errors / mean latency (ms)",
                 "%d/%d/%.1f" % (reconciles, errors, lat * 1e3), "-"))
    print(fmt % ("operator RSS idle / peak VmHWM (MiB)", "%.1f/%.1f" % (idle_mib, hwm_mib), "-"))
    cpu = (op["cpu_end_s"] - op["cpu_start_s"]
           if op.get("cpu_end_s") is not None and op.get("cpu_start_s") is not None else None)
    print(fmt % ("operator CPU time, user + system (s)", f(cpu), "-"))
    print(fmt % ("load average (1 min) at start / end", "%s/%s" % (
        f(op.get("load_start")), f(op.get("load_end"))), "%s/%s" % (
        f(di.get("load_start")), f(di.get("load_end")))))
    def requests(res):
        r0, r1 = res.get("requests_start") or {}, res.get("requests_end") or {}
        d = {v: r1.get(v, 0) - r0.get(v, 0) for v in r1}
        d = {v: n for v, n in d.items() if n >= 1}
        return "%d" % sum(d.values()) if d else "-", " ".join(
            "%s %d" % (v, d[v]) for v in sorted(d, key=lambda v: -d[v]))
    (op_n, op_by), (di_n, di_by) = requests(op), requests(di)
    print(fmt % ("apiserver requests, all clients, watches aside", op_n, di_n))
    print("    operator phase: %s\n    direct phase:   %s" % (op_by or "-", di_by or "-"))
    print("ratio operator/direct pods per second: %.1f / %.1f = %.2f" % (
        op_rate, di_rate, op_rate / di_rate))
    print("goal >= %.0f pods created per second: %s (%.1f)" % (
        GOAL_PODS_PER_S, "PASS" if op_rate >= GOAL_PODS_PER_S else "MISS", op_rate))
    print("goal peak RSS < %.0f MiB: %s (%.1f MiB, %d samples)" % (
        GOAL_RSS_MIB, "PASS" if hwm_mib < GOAL_RSS_MIB else "MISS", hwm_mib, op["rss_samples"]))
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("watch")
    w.add_argument("--server", required=True)
    w.add_argument("--token-file", required=True)
    w.add_argument("--ca", required=True)
    w.add_argument("--namespace", required=True)
    w.add_argument("--pods", type=int, required=True)
    w.add_argument("--jobs", type=int, default=0)
    w.add_argument("--metrics", default="")
    w.add_argument("--pid", type=int, default=0)
    w.add_argument("--timeout", type=float, required=True)
    w.add_argument("--ready", required=True)
    w.add_argument("--out", required=True)
    r = sub.add_parser("report")
    for k in ("--operator", "--direct", "--operator-t0", "--direct-t0"):
        r.add_argument(k, required=True)
    for k in ("--jobs", "--pods", "--parallel"):
        r.add_argument(k, type=int, required=True)
    r.add_argument("--op-client-s", type=float)
    r.add_argument("--di-client-s", type=float)
    a = p.parse_args()
    return watch_main(a) if a.cmd == "watch" else report_main(a)


if __name__ == "__main__":
    sys.exit(main())
