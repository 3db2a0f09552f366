// The rebalancer's thread.
#include "operator/rebalancer/loop.h"

#include <chrono>

#include "operator/controller/log.h"

namespace tlt::rebalancer {

RebalancerLoop::RebalancerLoop(std::unique_ptr<Rebalancer> rebalancer)
    : rebalancer_(std::move(rebalancer)) {}

RebalancerLoop::~RebalancerLoop() {
  stop();
}

void RebalancerLoop::start() {
  if (thread_.joinable()) return;
  stopping_ = false;
  thread_ = std::thread([this] {
    controller::log_info("Rebalancer started.", {});
    while (!stopping_) {
      auto wait = rebalancer_->tick();
      auto end = std::chrono::steady_clock::now() + std::max(wait, std::chrono::milliseconds(200));
      while (!stopping_ && std::chrono::steady_clock::now() < end)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
}

void RebalancerLoop::stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

}  // namespace tlt::rebalancer
