// Operator metrics on prometheus-cpp's core registry; the endpoint on cpprestsdk's listener.
#include "operator/controller/metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <cpprest/http_listener.h>

#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"

namespace tlt::controller {

using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;
using prometheus::Histogram;

struct OperatorMetrics::Families {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  Family<Counter>& reconciles = prometheus::BuildCounter()
                                    .Name("tlt_operator_reconcile_total")
                                    .Help("Reconciles by job kind and result (success, error).")
                                    .Register(*registry);
  Family<Histogram>& latency = prometheus::BuildHistogram()
                                   .Name("tlt_operator_reconcile_duration_seconds")
                                   .Help("Time one reconcile took.")
                                   .Register(*registry);
  Family<Gauge>& depth = prometheus::BuildGauge()
                             .Name("tlt_operator_workqueue_depth")
                             .Help("Job keys queued and ready for a worker.")
                             .Register(*registry);
  Family<Gauge>& jobs = prometheus::BuildGauge()
                            .Name("tlt_operator_jobs")
                            .Help("Jobs by kind and phase, as last reconciled.")
                            .Register(*registry);
  Family<Counter>& watch_restarts =
      prometheus::BuildCounter()
          .Name("tlt_operator_watch_restarts_total")
          .Help("Watches that started over with a list (reason gone: 410; error: other).")
          .Register(*registry);
  Family<Gauge>& leader = prometheus::BuildGauge()
                              .Name("tlt_operator_leader")
                              .Help("1 while this replica holds the leader Lease.")
                              .Register(*registry);
  Family<Counter>& decisions =
      prometheus::BuildCounter()
          .Name("tlt_operator_rebalancer_decisions_total")
          .Help(
              "Rebalancer decisions per RLJob (action assign_drafter, return_rollout, "
              "add_drafter, remove_drafter).")
          .Register(*registry);
  Family<Counter>& query_errors =
      prometheus::BuildCounter()
          .Name("tlt_operator_prometheus_query_errors_total")
          .Help("Rebalancer passes whose Prometheus utilisation query failed.")
          .Register(*registry);
};

OperatorMetrics::OperatorMetrics() : f_(std::make_unique<Families>()) {
  f_->depth.Add({}).Set(0);
  f_->leader.Add({}).Set(0);
  f_->query_errors.Add({});  // 0 from the start, so rate() sees the first error
}

OperatorMetrics::~OperatorMetrics() = default;

void OperatorMetrics::observe_reconcile(const std::string& kind, bool ok, double seconds) {
  f_->reconciles.Add({{"kind", kind}, {"result", ok ? "success" : "error"}}).Increment();
  f_->latency
      .Add({{"kind", kind}}, Histogram::BucketBoundaries{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                         0.1, 0.25, 0.5, 1, 2.5, 5, 10})
      .Observe(seconds);
}

void OperatorMetrics::set_job_phase(const std::string& key, const std::string& kind,
                                    const std::string& phase) {
  std::lock_guard<std::mutex> lock(mu_);
  if (phase.empty()) {
    phases_.erase(key);
  } else {
    phases_[key] = {kind, phase};
  }
}

void OperatorMetrics::add_watch_restart(const std::string& resource, const std::string& reason) {
  f_->watch_restarts.Add({{"resource", resource}, {"reason", reason}}).Increment();
}

void OperatorMetrics::declare_watch(const std::string& resource) {
  for (const char* reason : {"gone", "error"})
    f_->watch_restarts.Add({{"resource", resource}, {"reason", reason}});
}

void OperatorMetrics::set_leader(bool leader) {
  f_->leader.Add({}).Set(leader ? 1 : 0);
}

namespace {

constexpr const char* kDecisionActions[] = {"assign_drafter", "return_rollout", "add_drafter",
                                            "remove_drafter"};

}  // namespace

void OperatorMetrics::add_rebalancer_decision(const std::string& namespace_, const std::string& job,
                                              const std::string& action) {
  std::lock_guard<std::mutex> lock(mu_);
  decision_jobs_.insert({namespace_, job});
  f_->decisions.Add({{"namespace", namespace_}, {"job", job}, {"action", action}}).Increment();
}

void OperatorMetrics::declare_rebalancer_job(const std::string& namespace_,
                                             const std::string& job) {
  std::lock_guard<std::mutex> lock(mu_);
  decision_jobs_.insert({namespace_, job});
  for (const char* action : kDecisionActions)
    f_->decisions.Add({{"namespace", namespace_}, {"job", job}, {"action", action}});
}

void OperatorMetrics::retain_rebalancer_jobs(
    const std::set<std::pair<std::string, std::string>>& live) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = decision_jobs_.begin(); it != decision_jobs_.end();) {
    if (live.count(*it)) {
      ++it;
      continue;
    }
    for (const char* action : kDecisionActions) {
      Counter& c =
          f_->decisions.Add({{"namespace", it->first}, {"job", it->second}, {"action", action}});
      f_->decisions.Remove(&c);
    }
    it = decision_jobs_.erase(it);
  }
}

void OperatorMetrics::add_prometheus_query_error() {
  f_->query_errors.Add({}).Increment();
}

void OperatorMetrics::set_depth_source(std::function<double()> depth) {
  std::lock_guard<std::mutex> lock(mu_);
  depth_ = std::move(depth);
}

std::string OperatorMetrics::render() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (depth_) f_->depth.Add({}).Set(depth_());
    std::map<std::pair<std::string, std::string>, int> counts;
    for (const auto& [key, kp] : phases_) ++counts[kp];
    // Every phase seen so far stays as a series (0 when empty), so a rate() has no gaps.
    for (const char* kind : {"RLJob", "TSTPretrainJob"}) {
      for (const char* phase :
           {"Pending", "Running", "Blocked", "Suspended", "Succeeded", "Failed"}) {
        auto it = counts.find({kind, phase});
        f_->jobs.Add({{"kind", kind}, {"phase", phase}}).Set(it == counts.end() ? 0 : it->second);
      }
    }
  }
  return prometheus::TextSerializer().Serialize(f_->registry->Collect());
}

// ---------------------------------------------------------------------------------------------
// HTTP.

namespace {

namespace http = web::http;

// Why binding `bind`:`port` fails, with the fix; "" when a test bind works.
std::string bind_error(const std::string& bind, int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, bind.c_str(), &addr.sin_addr) != 1) return "";
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  int err = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 ? 0 : errno;
  close(fd);
  std::string p = std::to_string(port);
  if (err == 0) return "";
  if (err == EADDRINUSE) return "port " + p + " is in use; pass a free --metrics-port";
  if (err == EACCES) return "port " + p + " needs privileges; pass --metrics-port >= 1024";
  return std::strerror(err) + std::string("; pass another --metrics-port");
}

}  // namespace

struct HttpServer::Impl {
  std::unique_ptr<http::experimental::listener::http_listener> listener;
};

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() {
  try {
    impl_->listener->close().wait();
  } catch (const std::exception&) {
    // closing a listener that failed; nothing to do
  }
}

StatusOr<std::unique_ptr<HttpServer>> HttpServer::start(const std::string& bind, int port,
                                                        HttpHandlers handlers) {
  if (port <= 0 || port > 65535) {
    return Status::InvalidArgument("--metrics-port " + std::to_string(port) +
                                   ": must be in [1, 65535]");
  }
  in_addr ipv4{};
  if (inet_pton(AF_INET, bind.c_str(), &ipv4) != 1) {
    return Status::InvalidArgument("--metrics-bind-address \"" + bind +
                                   "\": must be a numeric IPv4 address such as 0.0.0.0");
  }
  auto impl = std::make_unique<Impl>();
  std::string address = "http://" + bind + ":" + std::to_string(port);
  impl->listener = std::make_unique<http::experimental::listener::http_listener>(address);
  impl->listener->support(http::methods::GET, [handlers](http::http_request req) {
    std::string path = req.relative_uri().path();
    try {
      if (path == "/metrics") {
        req.reply(http::status_codes::OK, handlers.metrics(),
                  "text/plain; version=0.0.4; charset=utf-8");
      } else if (path == "/healthz") {
        bool ok = handlers.healthy();
        req.reply(ok ? http::status_codes::OK : http::status_codes::InternalError,
                  ok ? "ok\n" : "unhealthy\n", "text/plain");
      } else if (path == "/readyz") {
        std::string why = handlers.not_ready();
        req.reply(why.empty() ? http::status_codes::OK : http::status_codes::ServiceUnavailable,
                  why.empty() ? "ok\n" : why + "\n", "text/plain");
      } else {
        req.reply(http::status_codes::NotFound, "not found: try /metrics, /healthz, /readyz\n",
                  "text/plain");
      }
    } catch (const std::exception&) {
      // the client went away mid-reply
    }
  });
  try {
    impl->listener->open().wait();
  } catch (const std::exception& e) {
    std::string why = bind_error(bind, port);
    if (why.empty()) why = e.what();
    return Status::Unavailable("cannot serve /metrics on " + bind + ":" + std::to_string(port) +
                               ": " + why);
  }
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

}  // namespace tlt::controller
