#include "runtime/cli/metrics_endpoint.h"

#include <ostream>

namespace tlt::cli {

MetricsEndpoint start_metrics(const std::string& job, int port, std::ostream& out,
                              std::ostream& err) {
  MetricsEndpoint e;
  if (port <= 0) return e;
  e.metrics = std::make_unique<metrics::RuntimeMetrics>(job);
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

}  // namespace tlt::cli
