// The /metrics endpoint of a local `tlt run` (RL and TST alike): a RuntimeMetrics labelled with
// the job's name, served on spec.metrics.port.
//
// Errors: none returned. A port of 0 turns metrics off (both pointers null); a port that cannot
// be bound is a warning on `err` naming spec.metrics.port, and the run goes on with the metrics
// kept in memory (server null) so the final exposition can still be written to the report.
//
// The final scrape: a run's last updates land after Prometheus's last scrape unless the
// process waits for one more, and then a short job's dashboards disagree with its report. So
// destroying an endpoint whose server has been scraped at least twice first waits for a scrape
// that reads the final values: at most 1.5 scrape intervals (as last observed) plus 0.5 s, and
// never more than 20 s. Nobody scraping means no wait.
// Ownership: the endpoint owns both and destroys the server before the metrics; `log` (for the
// one line saying it waits) is borrowed and must outlive the endpoint.
#pragma once

#include <chrono>
#include <iosfwd>
#include <memory>
#include <string>

#include "runtime/metrics/metrics.h"

namespace tlt::cli {

struct MetricsEndpoint {
  MetricsEndpoint() = default;
  MetricsEndpoint(MetricsEndpoint&&) = default;
  MetricsEndpoint& operator=(MetricsEndpoint&&) = default;
  ~MetricsEndpoint();

  std::unique_ptr<metrics::RuntimeMetrics> metrics;
  std::unique_ptr<metrics::Server> server;
  std::ostream* log = nullptr;
};

MetricsEndpoint start_metrics(const std::string& job, int port, std::ostream& out,
                              std::ostream& err);

// How long the end of a run waits for the final scrape of `s` (see above); zero when `s` has
// been scraped fewer than two times.
std::chrono::milliseconds final_scrape_wait(const metrics::Server& s);

}  // namespace tlt::cli
