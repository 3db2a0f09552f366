// The /metrics endpoint of a local `tlt run` (RL and TST alike): a RuntimeMetrics labelled with
// the job's name, served on spec.metrics.port.
//
// Errors: none returned. A port of 0 turns metrics off (both pointers null); a port that cannot
// be bound is a warning on `err` naming spec.metrics.port, and the run goes on with the metrics
// kept in memory (server null) so the final exposition can still be written to the report.
// Ownership: the caller owns both; destroy the server before the metrics.
#pragma once

#include <iosfwd>
#include <memory>
#include <string>

#include "runtime/metrics/metrics.h"

namespace tlt::cli {

struct MetricsEndpoint {
  std::unique_ptr<metrics::RuntimeMetrics> metrics;
  std::unique_ptr<metrics::Server> server;
};

MetricsEndpoint start_metrics(const std::string& job, int port, std::ostream& out,
                              std::ostream& err);

}  // namespace tlt::cli
