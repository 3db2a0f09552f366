// The operator's Prometheus metrics and its HTTP endpoint (/metrics, /healthz, /readyz).
//
// Metrics (DESIGN.md section 5; `tlt_operator_` prefix, base units):
//   tlt_operator_reconcile_total{kind,result}           reconciles, result success or error
//   tlt_operator_reconcile_duration_seconds{kind}       histogram of reconcile latency
//   tlt_operator_workqueue_depth                        keys queued and ready
//   tlt_operator_jobs{kind,phase}                       jobs by phase, as last reconciled
//   tlt_operator_watch_restarts_total{resource,reason}  watches re-listed (gone, error)
//   tlt_operator_leader                                  1 while this replica leads
//   tlt_operator_rebalancer_decisions_total{namespace,job,action}
//                                                       rebalancer decisions per RLJob, action
//                                                       assign_drafter, return_rollout,
//                                                       add_drafter or remove_drafter; a job's
//                                                       series go when the job is deleted
//                                                       (retain_rebalancer_jobs)
// These are the only series with a job's name among their labels, so the series a process
// exports stay bounded by the jobs that exist, whatever names job authors choose.
//   tlt_operator_prometheus_query_errors_total          rebalancer passes whose utilisation
//                                                       query failed (unreachable, garbage)
//
// The server runs on cpprestsdk's listener (no LibTorch in this binary, so none of the civetweb
// troubles of DESIGN.md section 7 apply, but one HTTP library is enough).
//
// Thread safety: every method of OperatorMetrics may be called from any thread.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "api/status.h"

namespace tlt::controller {

class OperatorMetrics {
 public:
  OperatorMetrics();
  ~OperatorMetrics();
  OperatorMetrics(const OperatorMetrics&) = delete;
  OperatorMetrics& operator=(const OperatorMetrics&) = delete;

  void observe_reconcile(const std::string& kind, bool ok, double seconds);
  // Records the phase of the job `key` ("" when it is gone).
  void set_job_phase(const std::string& key, const std::string& kind, const std::string& phase);
  void add_watch_restart(const std::string& resource, const std::string& reason);
  // Creates the watch-restart series of `resource` (both reasons) at 0, so that a rate over
  // them reads 0 rather than nothing before the first restart.
  void declare_watch(const std::string& resource);
  void set_leader(bool leader);
  void add_rebalancer_decision(const std::string& namespace_, const std::string& job,
                               const std::string& action);
  // Creates the decision series of a job (every action) at 0; see declare_watch().
  void declare_rebalancer_job(const std::string& namespace_, const std::string& job);
  // Removes the decision series of every job not in `live` ({namespace, name}: the RLJobs that
  // exist).
  void retain_rebalancer_jobs(const std::set<std::pair<std::string, std::string>>& live);
  void add_prometheus_query_error();
  // Read at every render for tlt_operator_workqueue_depth.
  void set_depth_source(std::function<double()> depth);

  // The text exposition format of every metric.
  std::string render();

 private:
  struct Families;
  std::unique_ptr<Families> f_;
  std::mutex mu_;
  std::map<std::string, std::pair<std::string, std::string>> phases_;  // key -> (kind, phase);
                                                                       // guarded by mu_
  std::function<double()> depth_;                                      // guarded by mu_
  // {namespace, job} of every job that has decision series; guarded by mu_
  std::set<std::pair<std::string, std::string>> decision_jobs_;
};

// GET /metrics (text format), /healthz (200 "ok" while `healthy`), /readyz (200 "ok" while
// `ready`, else 503 with the reason it returns). Other paths: 404.
struct HttpHandlers {
  std::function<std::string()> metrics;
  std::function<bool()> healthy;
  std::function<std::string()> not_ready;  // "" when ready, else why not
};

class HttpServer {
 public:
  // Listens on `bind`:`port` (bind a numeric IPv4 address, "0.0.0.0" for all). Unavailable,
  // saying why and what to change, when the port is taken.
  static StatusOr<std::unique_ptr<HttpServer>> start(const std::string& bind, int port,
                                                     HttpHandlers handlers);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

 private:
  struct Impl;
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tlt::controller
