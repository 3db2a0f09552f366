#include "runtime/rl/run_metrics.h"

#include <algorithm>
#include <vector>

namespace tlt::rl {

std::string WorkerNames::role(int w) const {
  return w < std::max(1, rollout_replicas) ? "rollout" : "drafter";
}

std::string WorkerNames::pod(int w) const {
  int rollout = std::max(1, rollout_replicas);
  return job + "-" + role(w) + "-" + std::to_string(w < rollout ? w : w - rollout);
}

void publish_step(metrics::RuntimeMetrics& m, const WorkerNames& names, const StepReport& r,
                  int workers) {
  m.set_rl_step(r.step);
  m.set_rl_reward_mean(r.reward_mean);
  m.add_rollout_tokens(uint64_t(r.tokens));
  m.set_drafter_version(r.drafter_version);
  m.add_drafter_train_steps(uint64_t(r.drafter_steps));
  if (r.drafter_loss >= 0) m.set_drafter_loss(r.drafter_loss);
  (void)m.add_reclaimed_seconds(r.reclaimed_worker_seconds);
  (void)m.add_idle_seconds(r.idle_worker_seconds);
  if (r.accept_length >= 1) (void)m.observe_accept_length(r.accept_length);
  for (const auto& [arm, n] : r.arms)
    for (int64_t k = 0; k < n; ++k) (void)m.add_arm_selected(arm);
  for (const auto& [phase, seconds] : r.phase_seconds)
    (void)m.add_rollout_phase_seconds(phase, std::max(seconds, 0.0));  // "other" may round < 0
  std::vector<bool> seen(size_t(workers), false);
  for (const Interval& i : r.timeline)
    if (i.worker >= 0 && i.worker < workers) seen[size_t(i.worker)] = true;
  for (int w = 0; w < workers; ++w) {
    if (!seen[size_t(w)]) continue;
    bool drafter = std::count(r.drafter_workers.begin(), r.drafter_workers.end(), w) > 0;
    m.set_drafter_assigned(names.pod(w), drafter);
  }
  // Busy share of each worker over the step's rollout phase: the device's, else the timeline's.
  std::vector<double> busy = busy_ratios(r);
  for (int w = 0; w < workers && size_t(w) < busy.size(); ++w)
    if (busy[size_t(w)] >= 0) (void)m.set_gpu_busy_ratio(names.pod(w), busy[size_t(w)]);
}

void publish_to(metrics::RuntimeMetrics* m, const WorkerNames& names, int workers,
                RunCallbacks* cb) {
  if (!m) return;
  std::function<void(const StepReport&)> step = cb->step;
  cb->step = [m, names, workers, step](const StepReport& r) {
    if (step) step(r);
    publish_step(*m, names, r, workers);
  };
  std::function<void(int, const std::string&)> state = cb->worker_state;
  cb->worker_state = [m, names, state](int w, const std::string& s) {
    if (state) state(w, s);
    (void)m->set_worker_state(names.pod(w), names.role(w), s);
  };
}

}  // namespace tlt::rl
