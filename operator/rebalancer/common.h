// What the rebalancer's files share (rebalancer.cc, pod_assignment.cc, drafter_scaling.cc,
// promql.cc): a job's window and interval, how ratios are printed, log fields naming the job.
// Not an interface: include it from operator/rebalancer/ only.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

#include "api/spec.h"
#include "operator/controller/clock.h"
#include "operator/controller/job.h"
#include "operator/controller/log.h"

namespace tlt::rebalancer {

// The controller's names the rebalancer's files use throughout.
using controller::log_error;
using controller::log_info;
using controller::log_warning;
using controller::ObservedJob;
using controller::WallTime;
using Json = nlohmann::json;

// spec.rebalancing.window in whole seconds, at least 1.
inline std::chrono::seconds window_of(const api::RebalancingSpec& spec) {
  return std::chrono::seconds(std::max<int64_t>(1, std::llround(spec.window.seconds)));
}
// spec.rebalancing.interval in whole seconds, at least 1.
inline std::chrono::seconds interval_of(const api::RebalancingSpec& spec) {
  return std::chrono::seconds(std::max<int64_t>(1, std::llround(spec.interval.seconds)));
}

// A ratio as Events, conditions and logs print it: three decimals ("0.050").
inline std::string ratio(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

// Log fields that start with the job ("namespace/name"), then `more`.
inline controller::LogFields fields(const controller::ObservedJob& job,
                                    controller::LogFields more) {
  controller::LogFields f = {{"job", job.namespace_ + "/" + job.name}};
  f.insert(f.end(), more.begin(), more.end());
  return f;
}

}  // namespace tlt::rebalancer
