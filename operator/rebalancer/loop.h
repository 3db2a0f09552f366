// Runs a Rebalancer on a thread of its own: tick(), sleep as long as it says (in slices, so stop()
// is prompt), repeat.
//
// Thread safety: start() and stop() from one owning thread; the rebalancer is used only by the
// loop's thread while it runs.
#pragma once

#include <atomic>
#include <memory>
#include <thread>

#include "operator/rebalancer/rebalancer.h"

namespace tlt::rebalancer {

class RebalancerLoop {
 public:
  explicit RebalancerLoop(std::unique_ptr<Rebalancer> rebalancer);
  ~RebalancerLoop();  // stop()s
  RebalancerLoop(const RebalancerLoop&) = delete;
  RebalancerLoop& operator=(const RebalancerLoop&) = delete;

  void start();
  // Returns once the thread has finished its current pass (a pass may wait on one Prometheus
  // query timeout).
  void stop();

 private:
  std::unique_ptr<Rebalancer> rebalancer_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace tlt::rebalancer
