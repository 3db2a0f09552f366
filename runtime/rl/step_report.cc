#include "runtime/rl/step_report.h"

#include <algorithm>
#include <cmath>

namespace tlt::rl {
using nlohmann::json;

json to_json(const StepReport& r) {
  json tl = json::array();
  for (const Interval& i : r.timeline)
    tl.push_back({{"worker", i.worker}, {"state", i.state}, {"start", i.start}, {"end", i.end}});
  return {{"step", r.step},
          {"rewardMean", r.reward_mean},
          {"responseTokens",
           {{"p50", r.len_p50}, {"p90", r.len_p90}, {"p99", r.len_p99}, {"max", r.len_max}}},
          {"rolloutSeconds", r.rollout_seconds},
          {"updateSeconds", r.update_seconds},
          {"publishSeconds", r.publish_seconds},
          {"updatePositions", r.update_positions},
          {"updateMicrobatches", r.update_microbatches},
          {"stepSeconds", r.step_seconds},
          {"generatingWorkerSeconds", r.generating_worker_seconds},
          {"idleWorkerSeconds", r.idle_worker_seconds},
          {"reclaimedWorkerSeconds", r.reclaimed_worker_seconds},
          {"acceptLength", r.accept_length},
          {"arms", r.arms},
          {"phaseSeconds", r.phase_seconds},
          {"copiedDrafts", r.copied_drafts},
          {"banditStepsAbsorbed", r.bandit_absorbed},
          {"draftVocabulary", r.draft_vocabulary},
          {"tokens", r.tokens},
          {"drafterVersion", r.drafter_version},
          {"drafterSteps", r.drafter_steps},
          {"drafterLoss", r.drafter_loss},
          {"stopLatencyMs", r.stop_latency_ms},
          {"kl", r.kl},
          {"clipFraction", r.clip_fraction},
          {"loss", r.loss},
          {"restarts", r.restarts},
          {"weightSyncRefused", r.weight_sync_refused},
          {"unpairedConnections", r.unpaired_connections},
          {"drafterWorkers", r.drafter_workers},
          {"timeline", tl},
          {"deviceBusySeconds", r.device_busy_seconds},
          {"gpuBusyRatio", busy_ratios(r)},
          {"gpuBusyFrom", busy_source(r)}};
}

StepReport step_from_json(const json& j) {
  StepReport r;
  r.step = j.at("step");
  r.reward_mean = j.at("rewardMean");
  r.len_p50 = j.at("responseTokens").at("p50"), r.len_p90 = j.at("responseTokens").at("p90");
  r.len_p99 = j.at("responseTokens").at("p99"), r.len_max = j.at("responseTokens").at("max");
  r.rollout_seconds = j.at("rolloutSeconds"), r.update_seconds = j.at("updateSeconds");
  r.step_seconds = j.at("stepSeconds");
  r.publish_seconds = j.value("publishSeconds", 0.0);  // absent from older reports
  r.update_positions = j.value("updatePositions", int64_t(0));
  r.weight_sync_refused = j.value("weightSyncRefused", int64_t(0));
  r.unpaired_connections = j.value("unpairedConnections", int64_t(0));
  r.update_microbatches = j.value("updateMicrobatches", int64_t(0));
  r.generating_worker_seconds = j.at("generatingWorkerSeconds");
  r.idle_worker_seconds = j.at("idleWorkerSeconds");
  r.reclaimed_worker_seconds = j.at("reclaimedWorkerSeconds");
  r.accept_length = j.at("acceptLength");
  r.arms = j.at("arms").get<std::map<std::string, int64_t>>();
  r.phase_seconds = j.value("phaseSeconds", std::map<std::string, double>{});  // (older reports)
  r.copied_drafts = j.value("copiedDrafts", int64_t(0));  // absent from older reports
  r.bandit_absorbed = j.value("banditStepsAbsorbed", int64_t(0));
  r.draft_vocabulary = j.value("draftVocabulary", int64_t(0));
  r.tokens = j.at("tokens");
  r.drafter_version = j.at("drafterVersion"), r.drafter_steps = j.at("drafterSteps");
  r.drafter_loss = j.at("drafterLoss"), r.stop_latency_ms = j.at("stopLatencyMs");
  r.kl = j.at("kl"), r.clip_fraction = j.at("clipFraction"), r.loss = j.at("loss");
  r.restarts = j.at("restarts");
  r.drafter_workers = j.value("drafterWorkers", std::vector<int>{});
  for (const json& i : j.at("timeline"))
    r.timeline.push_back({i.at("worker"), i.at("state"), i.at("start"), i.at("end")});
  r.device_busy_seconds = j.value("deviceBusySeconds", std::vector<double>{});
  return r;
}

std::vector<double> busy_ratios(const StepReport& r) {
  if (r.rollout_seconds <= 0) return {};
  int workers = 0;
  for (const Interval& i : r.timeline) workers = std::max(workers, i.worker + 1);
  std::vector<double> busy(size_t(workers), 0.0);
  std::vector<bool> seen(size_t(workers), false);
  for (const Interval& i : r.timeline) {
    if (i.worker < 0) continue;
    seen[size_t(i.worker)] = true;
    if (i.state != "released" && i.state != "idle" && i.end <= r.rollout_seconds + 1e-9)
      busy[size_t(i.worker)] += i.end - i.start;
  }
  std::vector<double> out(size_t(workers), -1.0);
  for (int w = 0; w < workers; ++w) {
    if (!seen[size_t(w)]) continue;
    bool device = size_t(w) < r.device_busy_seconds.size() && r.device_busy_seconds[size_t(w)] >= 0;
    double seconds = device ? r.device_busy_seconds[size_t(w)] : busy[size_t(w)];
    out[size_t(w)] = std::clamp(seconds / r.rollout_seconds, 0.0, 1.0);
  }
  return out;
}

const char* busy_source(const StepReport& r) {
  for (double s : r.device_busy_seconds)
    if (s >= 0) return "device";
  return "clock";
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t k = size_t(std::ceil(q * double(v.size())));
  return v[std::min(v.size() - 1, k == 0 ? 0 : k - 1)];
}

}  // namespace tlt::rl
