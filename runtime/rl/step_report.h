// The report of one RL step (runtime/rl/run.h): what the progress line, /metrics, the job's
// report directory and the RL checkpoint's state.json carry, and its JSON form.
//
// to_json writes camelCase keys; step_from_json reads them back and throws nlohmann::json's
// exceptions on a missing or mistyped field (fields added after the first reports default to
// zero/empty when absent). The caller turns those into a Status naming the file.
//
// Thread safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tlt::rl {

struct Interval {
  int worker = 0;
  std::string state;          // generating | released (done, not training) | training
  double start = 0, end = 0;  // seconds since the step began
};

struct StepReport {
  int64_t step = 0;  // 1-based
  double reward_mean = 0.0;
  double len_p50 = 0, len_p90 = 0, len_p99 = 0, len_max = 0;  // response tokens
  double rollout_seconds = 0, update_seconds = 0, step_seconds = 0;
  double publish_seconds = 0;  // writing the updated policy for the workers (in step_seconds)
  // The policy update's training forwards: token positions run (padding included, a group's
  // shared prompt once per minibatch) and micro-batches (rl::UpdateStats).
  int64_t update_positions = 0, update_microbatches = 0;
  double generating_worker_seconds = 0, idle_worker_seconds = 0, reclaimed_worker_seconds = 0;
  double accept_length = 0.0;  // mean tokens per request per speculative step (0: none)
  std::map<std::string, int64_t> arms;
  // Generating worker-seconds by rollout engine phase (rollout::EnginePhases: "plain",
  // "verify", ..., "other"), summed over the workers.
  std::map<std::string, double> phase_seconds;
  int64_t copied_drafts = 0;     // drafts copied from context (spec.speculative.ngramShortcut)
  int64_t bandit_absorbed = 0;   // bandit steps the workers took over from each other
  int64_t draft_vocabulary = 0;  // largest draft vocabulary among the workers (0: none ran)
  int64_t tokens = 0;
  int64_t drafter_version = 0, drafter_steps = 0;
  double drafter_loss = -1;    // last training loss this step (-1: no training)
  double stop_latency_ms = 0;  // slowest preemption of a drafter trainer
  double kl = 0, clip_fraction = 0, loss = 0;
  int64_t restarts = 0;
  // Weight publishes over the weight-sync group (runtime/rl/weight_sync.h) that a worker refused
  // (a bucket failed its checksum, or a stale version): must be 0. Such a worker loaded the file.
  int64_t weight_sync_refused = 0;
  // Connections to the trainer's rendezvous port closed without pairing since the previous
  // step (no valid proof of the job secret in time, or over the handshake cap): 0 unless some
  // peer that is not the job's own connects (runtime/rl/rendezvous.h).
  int64_t unpaired_connections = 0;
  std::vector<int> drafter_workers;  // dedicated to drafter training this step (rebalancer)
  std::vector<Interval> timeline;
  // Per worker: the seconds of its generate and train calls this step during which its GPU was
  // busy, as the device measured them (runtime/device/busy.h), a call it did not measure counted
  // as busy throughout (as the timeline counts it); -1 for a worker whose device measured none
  // of its calls. Empty when no worker's device measured any (the CPU).
  std::vector<double> device_busy_seconds;
};

// Per worker (index = worker, up to the largest one in the timeline): the share of the step's
// rollout phase it was busy, in [0, 1] (tlt_gpu_busy_ratio): the device's busy seconds where it
// measured them, else the timeline's generating and training intervals; -1 for a worker with
// no interval (absent). Empty when the rollout phase took no time.
std::vector<double> busy_ratios(const StepReport& r);

// Whether busy_ratios came from a device for any worker ("device"), else "clock".
const char* busy_source(const StepReport& r);

nlohmann::json to_json(const StepReport& r);
StepReport step_from_json(const nlohmann::json& j);

// The q-quantile (0..1, nearest rank) of v; 0 for an empty v.
double percentile(std::vector<double> v, double q);

}  // namespace tlt::rl
