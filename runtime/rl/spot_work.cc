#include "runtime/rl/spot_work.h"

#include <cerrno>
#include <stdexcept>
#include <utility>
#ifdef __linux__
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace tlt::rl {
namespace {

constexpr int kSpotNice = 19;  // the lowest priority a thread can take without privileges

// Lowers the calling thread alone (on Linux, setpriority on a thread id is per thread).
bool lower_this_thread() {
#ifdef __linux__
  return setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), kSpotNice) == 0;
#else
  return false;
#endif
}

}  // namespace

int SpotWork::current_thread_nice() {
#ifdef __linux__
  errno = 0;
  int n = getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)));
  return errno == 0 ? n : 0;
#else
  return 0;
#endif
}

SpotWork::SpotWork(std::function<void()> step)
    : SpotWork(std::function<void(const std::atomic<bool>&)>(
          [step = std::move(step)](const std::atomic<bool>&) { step(); })) {}

SpotWork::SpotWork(std::function<void(const std::atomic<bool>&)> step)
    : step_(std::move(step)), thread_([this] {
        lowered_ = lower_this_thread();
        try {
          while (!stop_.load(std::memory_order_acquire)) step_(stop_);
        } catch (...) {
          error_ = std::current_exception();
        }
      }) {}

SpotWork::~SpotWork() {
  (void)stop();
}  // the error was the caller's to ask for

Status SpotWork::stop() {
  if (joined_) return result_;
  stop_.store(true, std::memory_order_release);
  thread_.join();
  joined_ = true;
  if (error_) {
    try {
      std::rethrow_exception(error_);
    } catch (const std::exception& e) {
      result_ = Status::Internal(std::string("spot work: ") + e.what());
    } catch (...) {
      result_ = Status::Internal("spot work: a step threw a non-standard exception");
    }
  }
  return result_;
}

}  // namespace tlt::rl
