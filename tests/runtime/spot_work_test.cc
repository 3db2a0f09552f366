#include "runtime/rl/spot_work.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

namespace tlt::rl {
namespace {

TEST(SpotWork, RunsStepsOnALowerPriorityThreadUntilStopped) {
  int caller_nice = SpotWork::current_thread_nice();
  std::atomic<int> steps{0};
  std::atomic<int> nice_inside{-100};
  std::atomic<bool> other_thread{false};
  std::thread::id caller = std::this_thread::get_id();
  SpotWork spot([&] {
    nice_inside = SpotWork::current_thread_nice();
    other_thread = std::this_thread::get_id() != caller;
    ++steps;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  while (steps.load() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(spot.stop().ok());
  int after = steps.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(steps.load(), after) << "a step ran after stop() returned";
  EXPECT_TRUE(other_thread.load());
  EXPECT_EQ(SpotWork::current_thread_nice(), caller_nice) << "the caller's priority changed";
#ifdef __linux__
  EXPECT_TRUE(spot.lowered());
  EXPECT_EQ(nice_inside.load(), 19);
#endif
}

TEST(SpotWork, StopWaitsForTheStepUnderWay) {
  std::atomic<bool> in_step{false}, finished{false};
  SpotWork spot([&] {
    in_step = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    finished = true;
  });
  while (!in_step.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(spot.stop().ok());
  EXPECT_TRUE(finished.load()) << "stop() returned in the middle of a step";
}

TEST(SpotWork, AStepSeesStopAndCanGiveUpPartWay) {
  std::atomic<bool> in_step{false}, saw_stop{false};
  SpotWork spot([&](const std::atomic<bool>& stopping) {
    in_step = true;
    // A step far longer than the test: only the flag ends it.
    for (int i = 0; i < 60000 && !stopping.load(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    saw_stop = stopping.load();
  });
  while (!in_step.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(spot.stop().ok());
  EXPECT_TRUE(saw_stop.load()) << "the step under way never saw stop()";
}

TEST(SpotWork, AThrowingStepEndsTheLoopAndStopReportsIt) {
  std::atomic<int> steps{0};
  SpotWork spot([&] {
    if (++steps == 2) throw std::runtime_error("drafter step failed");
  });
  while (steps.load() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  Status st = spot.stop();
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_NE(st.message().find("drafter step failed"), std::string::npos) << st.to_string();
  EXPECT_EQ(steps.load(), 2) << "the loop went on after a step threw";
  EXPECT_EQ(spot.stop().code(), StatusCode::kInternal) << "a second stop() forgot the error";
}

}  // namespace
}  // namespace tlt::rl
