// Spot work: a loop that gives its CPU to anything else that wants it.
//
// TLT trains the drafter on rollout workers whose requests are done, until the rollout's long
// tail finishes (the paper's "spot trainer"). That work must not slow the workers still
// generating. On one machine whose cores are shared (`tlt run`, two workers on two cores, other
// processes beside them), a trainer at normal priority makes the kernel place every other
// runnable task on the generating worker's core as often as on its own; measured on
// bench/rl_e2e.sh under a load of 2-4, the generating workers' plain decoding then took 1.5x as
// long as with the drafter frozen. SpotWork runs the loop on its own thread at the lowest CPU
// priority (nice 19; the calling thread keeps its own), so the scheduler hands the trainer's core
// to other tasks first, and the loop still makes progress on an otherwise idle core.
//
// Thread safety: construct, stop() and destroy from one thread; `step` runs on the spot thread
// only, and must not share unsynchronised state with the caller while it runs.
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <thread>

#include "api/status.h"

namespace tlt::rl {

class SpotWork {
 public:
  // Starts a thread that lowers its own priority, then calls `step` until stop(); each call is
  // one unit of work, and the loop is preempted only between calls.
  explicit SpotWork(std::function<void()> step);
  // As above, and `step` is handed the flag stop() sets, so that a long step can give up its
  // work part-way (drafter::DrafterTrainer::try_step) instead of delaying stop() to its end.
  explicit SpotWork(std::function<void(const std::atomic<bool>& stopping)> step);
  ~SpotWork();  // stop()s if still running
  SpotWork(const SpotWork&) = delete;
  SpotWork& operator=(const SpotWork&) = delete;

  // Ends the loop after the current step (or as soon as that step sees the flag) and joins the
  // thread. Internal with the message of what
  // a step threw (the loop ends there), else Ok. Later calls return the same.
  Status stop();

  // Whether the thread's priority was lowered (false where the system refused; the work then ran
  // at the caller's priority). Valid after stop().
  bool lowered() const { return lowered_; }

  // This thread's nice value (Linux: a per-thread attribute); 0 where unsupported.
  static int current_thread_nice();

 private:
  std::function<void(const std::atomic<bool>&)> step_;
  std::atomic<bool> stop_{false};
  bool lowered_ = false;
  std::exception_ptr error_;
  std::thread thread_;  // last: starts after the members it uses
  bool joined_ = false;
  Status result_;
};

}  // namespace tlt::rl
