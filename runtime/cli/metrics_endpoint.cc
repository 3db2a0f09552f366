#include "runtime/cli/metrics_endpoint.h"

#include <algorithm>
#include <ostream>

#include "api/validate.h"

namespace tlt::cli {

MetricsEndpoint start_metrics(const std::string& job, int port, std::ostream& out,
                              std::ostream& err) {
  MetricsEndpoint e;
  if (port <= 0) return e;
  e.metrics = std::make_unique<metrics::RuntimeMetrics>(job);
  e.log = &out;
  StatusOr<std::unique_ptr<metrics::Server>> s = metrics::serve(*e.metrics, port);
  if (s.ok()) {
    e.server = std::move(*s);
    out << "tlt run: metrics on http://localhost:" << e.server->port() << "/metrics\n";
  } else {
    err << "tlt run: warning: spec.metrics.port: " << s.status().message()
        << " (running without /metrics; choose a free port or 0)\n";
  }
  return e;
}

std::chrono::milliseconds final_scrape_wait(const metrics::Server& s) {
  using std::chrono::milliseconds;
  if (s.scrapes() < 2) return milliseconds(0);
  milliseconds wait = s.last_scrape_interval() * 3 / 2 + milliseconds(500);
  return std::min(wait, milliseconds(20000));
}

MetricsEndpoint::~MetricsEndpoint() {
  if (!server) return;
  std::chrono::milliseconds wait = final_scrape_wait(*server);
  if (wait.count() == 0) return;
  if (log) {
    *log << "tlt run: waiting up to " << api::format_seconds(double(wait.count()) / 1000.0)
         << " for Prometheus to scrape the final metrics\n";
    log->flush();
  }
  server->await_scrape(wait);
}

}  // namespace tlt::cli
