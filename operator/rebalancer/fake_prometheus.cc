// The in-memory PrometheusClient.
#include "operator/rebalancer/fake_prometheus.h"

namespace tlt::rebalancer {

StatusOr<std::vector<Sample>> FakePrometheus::query(const std::string& base_url,
                                                    const std::string& promql) {
  std::lock_guard<std::mutex> lock(mu_);
  asked_.emplace_back(base_url, promql);
  if (!handler_) return std::vector<Sample>{};
  return handler_(base_url, promql);
}

void FakePrometheus::set_handler(Handler handler) {
  std::lock_guard<std::mutex> lock(mu_);
  handler_ = std::move(handler);
}

std::vector<std::pair<std::string, std::string>> FakePrometheus::queries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return asked_;
}

}  // namespace tlt::rebalancer
