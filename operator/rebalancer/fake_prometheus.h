// An in-memory PrometheusClient for unit tests: answers every query through a handler the test
// sets (by default: an empty vector) and records what was asked.
//
// Thread safety: all methods may be called concurrently (one mutex; the handler runs under it).
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "operator/rebalancer/prometheus_client.h"

namespace tlt::rebalancer {

class FakePrometheus : public PrometheusClient {
 public:
  using Handler = std::function<StatusOr<std::vector<Sample>>(const std::string& base_url,
                                                              const std::string& promql)>;

  StatusOr<std::vector<Sample>> query(const std::string& base_url,
                                      const std::string& promql) override;

  // Every later query is answered by `handler`.
  void set_handler(Handler handler);
  // (base_url, promql) of every query so far, in order.
  std::vector<std::pair<std::string, std::string>> queries() const;

 private:
  mutable std::mutex mu_;
  Handler handler_;                                         // guarded by mu_
  std::vector<std::pair<std::string, std::string>> asked_;  // guarded by mu_
};

}  // namespace tlt::rebalancer
