// PodsPending: pods Pending past a timeout, named with the scheduler's reason.
#include "operator/controller/pods_pending.h"

#include "operator/controller/job_status.h"

namespace tlt::controller {

using Json = nlohmann::json;

namespace {

constexpr size_t kNamedPods = 5;  // the message names this many; the rest are counted

std::string describe(const PendingPod& p) {
  if (p.unscheduled_reason.empty()) return p.name + " (scheduled, not started)";
  std::string m = p.unscheduled_message.substr(0, 200);
  return p.name + " (" + p.unscheduled_reason + (m.empty() ? "" : ": " + m) + ")";
}

}  // namespace

PendingReport pods_pending(const std::vector<PendingPod>& pods, WallTime now,
                           std::chrono::seconds timeout, const Json& stored_status,
                           int64_t generation) {
  PendingReport out;
  std::vector<const PendingPod*> late;
  for (const PendingPod& p : pods) {
    if (p.phase != "Pending" || !p.created) continue;
    auto age = std::chrono::duration_cast<std::chrono::seconds>(now - *p.created);
    if (age >= timeout) {
      late.push_back(&p);
      continue;
    }
    std::chrono::seconds left = timeout - age + std::chrono::seconds(1);
    if (!out.recheck_after || left < *out.recheck_after) out.recheck_after = left;
  }
  bool stored = false, stored_true = false;
  for (const Json& c : stored_status.value("conditions", Json::array())) {
    if (c.value("type", "") != kPodsPendingCondition) continue;
    stored = true;
    stored_true = c.value("status", "") == "True";
  }
  const std::string now_text = format_time(now);
  if (late.empty()) {
    if (stored) {
      out.condition = make_condition(
          stored_status, kPodsPendingCondition, false, "NoPodsPending",
          "No pod has been Pending longer than " + std::to_string(timeout.count()) + " s.",
          generation, now_text);
    }
    return out;
  }
  std::string names;
  for (size_t i = 0; i < late.size() && i < kNamedPods; ++i)
    names += (names.empty() ? "" : "; ") + describe(*late[i]);
  if (late.size() > kNamedPods)
    names += "; and " + std::to_string(late.size() - kNamedPods) + " more";
  out.condition = make_condition(
      stored_status, kPodsPendingCondition, true,
      late.front()->unscheduled_reason.empty() ? "PodsNotStarted"
                                               : late.front()->unscheduled_reason,
      std::to_string(late.size()) + " pods Pending longer than " + std::to_string(timeout.count()) +
          " s: " + names +
          ". The pods are kept; the running ones hold their resources meanwhile (Kueue's "
          "waitForPodsReady gives them back: docs/kueue.md).",
      generation, now_text);
  out.turned_true = !stored_true;
  return out;
}

}  // namespace tlt::controller
