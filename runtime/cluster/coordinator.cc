#include "runtime/cluster/coordinator.h"

#include <algorithm>

namespace tlt::cluster {

const char* state_name(WorkerState s) {
  switch (s) {
    case WorkerState::kIdle:
      return "IDLE";
    case WorkerState::kGenerating:
      return "GENERATING";
    case WorkerState::kReleased:
      return "RELEASED";
    case WorkerState::kTraining:
      return "TRAINING";
  }
  return "UNKNOWN";
}

Coordinator::Coordinator(int n_workers, int min_idle_workers)
    : min_idle_(std::max(1, min_idle_workers)), workers_(size_t(std::max(0, n_workers))) {}

Status Coordinator::check_index(int worker) const {
  if (worker < 0 || worker >= int(workers_.size())) {
    return Status::InvalidArgument("worker " + std::to_string(worker) + " does not exist (" +
                                   std::to_string(workers_.size()) + " workers)");
  }
  return Status::Ok();
}

void Coordinator::enter(int worker, WorkerState s, double now) {
  Worker& w = workers_[size_t(worker)];
  double spent = std::max(0.0, now - w.since);
  if (w.state == WorkerState::kReleased) idle_total_ += spent;
  if (w.state == WorkerState::kTraining) reclaimed_total_ += spent;
  w.state = s;
  w.since = now;
}

Status Coordinator::begin_step(int64_t step, double now) {
  if (in_step_) {
    return Status::FailedPrecondition("step " + std::to_string(step_) +
                                      " has not ended; call end_step first");
  }
  for (int i = 0; i < int(workers_.size()); ++i) {
    if (!workers_[size_t(i)].absent) enter(i, WorkerState::kGenerating, now);
  }
  step_ = step;
  in_step_ = true;
  return Status::Ok();
}

Status Coordinator::set_dedicated(const std::vector<int>& workers) {
  for (int w : workers) TLT_RETURN_IF_ERROR(check_index(w));
  for (Worker& w : workers_) w.dedicated = false;
  for (int w : workers) workers_[size_t(w)].dedicated = true;
  return Status::Ok();
}

Status Coordinator::set_absent(const std::vector<int>& workers) {
  for (int w : workers) TLT_RETURN_IF_ERROR(check_index(w));
  if (in_step_) {
    return Status::FailedPrecondition("step " + std::to_string(step_) +
                                      " is under way; a worker leaving now calls worker_left");
  }
  for (Worker& w : workers_) w.absent = false;
  for (int w : workers) workers_[size_t(w)].absent = true;
  return Status::Ok();
}

Status Coordinator::worker_left(int worker, double now) {
  TLT_RETURN_IF_ERROR(check_index(worker));
  if (workers_[size_t(worker)].state == WorkerState::kGenerating) {
    return Status::FailedPrecondition("worker " + std::to_string(worker) +
                                      " is GENERATING; restart it so its requests rerun");
  }
  enter(worker, WorkerState::kIdle, now);
  workers_[size_t(worker)].absent = true;
  return Status::Ok();
}

StatusOr<std::vector<int>> Coordinator::worker_done(int worker, double now) {
  TLT_RETURN_IF_ERROR(check_index(worker));
  if (workers_[size_t(worker)].state != WorkerState::kGenerating) {
    return Status::FailedPrecondition(std::string("worker ") + std::to_string(worker) + " is " +
                                      state_name(workers_[size_t(worker)].state) +
                                      ", not GENERATING");
  }
  enter(worker, WorkerState::kReleased, now);
  return assign_training(now);
}

std::vector<int> Coordinator::assign_training(double now) {
  int released = 0;
  for (const Worker& w : workers_) {
    released += w.state == WorkerState::kReleased || w.state == WorkerState::kTraining;
  }
  std::vector<int> start;
  for (int i = 0; i < int(workers_.size()); ++i) {
    const Worker& w = workers_[size_t(i)];
    if (w.state == WorkerState::kReleased && (w.dedicated || released >= min_idle_)) {
      enter(i, WorkerState::kTraining, now);
      start.push_back(i);
    }
  }
  return start;
}

StatusOr<std::vector<int>> Coordinator::worker_restarted(int worker, double now) {
  TLT_RETURN_IF_ERROR(check_index(worker));
  if (workers_[size_t(worker)].state != WorkerState::kTraining) return std::vector<int>{};
  enter(worker, WorkerState::kReleased, now);
  return assign_training(now);
}

bool Coordinator::rollout_finished() const {
  return std::none_of(workers_.begin(), workers_.end(),
                      [](const Worker& w) { return w.state == WorkerState::kGenerating; });
}

StatusOr<std::vector<int>> Coordinator::end_step(double now) {
  if (!rollout_finished()) {
    return Status::FailedPrecondition("step " + std::to_string(step_) +
                                      " still has generating workers");
  }
  std::vector<int> preempted;
  for (int i = 0; i < int(workers_.size()); ++i) {
    if (workers_[size_t(i)].state == WorkerState::kTraining) preempted.push_back(i);
    enter(i, WorkerState::kIdle, now);
  }
  in_step_ = false;
  return preempted;
}

}  // namespace tlt::cluster
