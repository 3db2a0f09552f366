// The coordinator's state machine: release, spot training, preemption at the step boundary,
// restarts, absent and departing workers (a cluster job's drafter pods), and the idle/reclaimed
// accounting.
#include <gtest/gtest.h>

#include "runtime/cluster/coordinator.h"

namespace tlt::cluster {
namespace {

TEST(Coordinator, ReleasedWorkersTrainUntilTheStepBoundary) {
  Coordinator c(3, /*min_idle_workers=*/1);
  ASSERT_TRUE(c.begin_step(0, 0.0).ok());
  EXPECT_EQ(c.state(0), WorkerState::kGenerating);
  auto started = c.worker_done(1, 2.0);  // worker 1 finishes first (the others are the tail)
  ASSERT_TRUE(started.ok());
  EXPECT_EQ(*started, std::vector<int>{1});
  EXPECT_EQ(c.state(1), WorkerState::kTraining);
  EXPECT_FALSE(c.rollout_finished());
  EXPECT_EQ(c.end_step(3.0).status().code(), StatusCode::kFailedPrecondition)
      << "no step boundary while workers generate";
  ASSERT_TRUE(c.worker_done(0, 5.0).ok());
  ASSERT_TRUE(c.worker_done(2, 10.0).ok());
  EXPECT_TRUE(c.rollout_finished());
  auto preempted = c.end_step(10.0);
  ASSERT_TRUE(preempted.ok());
  EXPECT_EQ(*preempted, (std::vector<int>{0, 1, 2}));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(c.state(i), WorkerState::kIdle);
  // Worker 1 trained 2..10, worker 0 5..10, worker 2 for 0 s: 13 worker-seconds reclaimed.
  EXPECT_DOUBLE_EQ(c.reclaimed_seconds(), 13.0);
  EXPECT_DOUBLE_EQ(c.idle_seconds(), 0.0);
  EXPECT_DOUBLE_EQ(c.reclaimed_share(), 1.0);
}

TEST(Coordinator, WaitsForMinIdleWorkersThenStartsThemTogether) {
  Coordinator c(4, /*min_idle_workers=*/2);
  ASSERT_TRUE(c.begin_step(7, 0.0).ok());
  auto first = c.worker_done(3, 1.0);
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(first->empty());
  EXPECT_EQ(c.state(3), WorkerState::kReleased);
  auto second = c.worker_done(0, 4.0);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*second, (std::vector<int>{0, 3}));
  // Worker 3 sat idle 1..4 before training began.
  ASSERT_TRUE(c.worker_done(1, 6.0).ok());
  ASSERT_TRUE(c.worker_done(2, 6.0).ok());
  ASSERT_TRUE(c.end_step(6.0).ok());
  EXPECT_DOUBLE_EQ(c.idle_seconds(), 3.0);
  EXPECT_DOUBLE_EQ(c.reclaimed_seconds(), 2.0 + 2.0);
  EXPECT_DOUBLE_EQ(c.reclaimed_share(), 4.0 / 7.0);
}

TEST(Coordinator, DedicatedWorkerTrainsAtOnceWhateverMinIdle) {
  Coordinator c(3, /*min_idle_workers=*/3);
  ASSERT_TRUE(c.set_dedicated({2}).ok());
  EXPECT_EQ(c.set_dedicated({5}).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(c.dedicated(2)) << "a refused set leaves the old one";
  ASSERT_TRUE(c.begin_step(1, 0.0).ok());
  auto d = c.worker_done(2, 0.0);  // no requests: done at once, trains at once
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, std::vector<int>{2});
  auto first = c.worker_done(0, 3.0);  // not dedicated: waits for min_idle_workers
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(first->empty());
  ASSERT_TRUE(c.worker_done(1, 5.0).ok());
  ASSERT_TRUE(c.end_step(5.0).ok());
  EXPECT_DOUBLE_EQ(c.reclaimed_seconds(), 5.0 + 0.0 + 0.0);
  EXPECT_DOUBLE_EQ(c.idle_seconds(), 2.0);
  ASSERT_TRUE(c.set_dedicated({}).ok());
  EXPECT_FALSE(c.dedicated(2));
}

TEST(Coordinator, IllegalTransitionsAreRefused) {
  Coordinator c(2, 1);
  EXPECT_EQ(c.worker_done(0, 0.0).status().code(), StatusCode::kFailedPrecondition)
      << "not generating before a step";
  ASSERT_TRUE(c.begin_step(0, 0.0).ok());
  EXPECT_EQ(c.begin_step(1, 1.0).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(c.worker_done(5, 1.0).status().code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(c.worker_done(0, 1.0).ok());
  EXPECT_EQ(c.worker_done(0, 2.0).status().code(), StatusCode::kFailedPrecondition) << "done twice";
}

TEST(Coordinator, RestartedTrainerLosesItsTrainingNotTheStep) {
  Coordinator c(2, 1);
  ASSERT_TRUE(c.begin_step(0, 0.0).ok());
  ASSERT_TRUE(c.worker_done(0, 1.0).ok());  // 0 trains from 1
  auto back = c.worker_restarted(0, 3.0);   // it died; back at 3 and rejoins training
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, std::vector<int>{0});
  EXPECT_EQ(c.state(0), WorkerState::kTraining);
  auto gen = c.worker_restarted(1, 3.0);  // a generating worker keeps generating
  ASSERT_TRUE(gen.ok());
  EXPECT_TRUE(gen->empty());
  EXPECT_EQ(c.state(1), WorkerState::kGenerating);
  ASSERT_TRUE(c.worker_done(1, 5.0).ok());
  ASSERT_TRUE(c.end_step(6.0).ok());
  EXPECT_DOUBLE_EQ(c.reclaimed_seconds(), 2.0 + 3.0 + 1.0);  // 1..3 and 3..6, worker 1 5..6
  EXPECT_DOUBLE_EQ(c.idle_seconds(), 0.0);
  EXPECT_EQ(c.step(), 0);
}

TEST(Coordinator, AbsentWorkerSitsOutAndLeavingTrainerEndsItsAccounting) {
  // Workers 0-1 generate; 2 and 3 are drafter pods: 3 has not connected.
  Coordinator c(4, /*min_idle_workers=*/1);
  ASSERT_TRUE(c.set_absent({3}).ok());
  ASSERT_TRUE(c.set_dedicated({2}).ok());
  ASSERT_TRUE(c.begin_step(1, 0.0).ok());
  EXPECT_EQ(c.state(3), WorkerState::kIdle) << "an absent worker does not generate";
  EXPECT_EQ(c.worker_done(3, 0.0).status().code(), StatusCode::kFailedPrecondition);
  auto started = c.worker_done(2, 0.0);
  ASSERT_TRUE(started.ok());
  EXPECT_EQ(*started, std::vector<int>{2});
  EXPECT_EQ(c.set_absent({}).code(), StatusCode::kFailedPrecondition) << "not within a step";
  EXPECT_EQ(c.worker_left(0, 1.0).code(), StatusCode::kFailedPrecondition)
      << "a generating worker is restarted, not dropped";
  // Worker 2's pod goes away at t=3: its training stops counting then.
  ASSERT_TRUE(c.worker_left(2, 3.0).ok());
  EXPECT_TRUE(c.absent(2));
  auto more = c.worker_done(0, 4.0);
  ASSERT_TRUE(more.ok());
  EXPECT_EQ(*more, std::vector<int>{0}) << "the absent ones never train";
  ASSERT_TRUE(c.worker_done(1, 6.0).ok());
  EXPECT_TRUE(c.rollout_finished());
  auto preempted = c.end_step(6.0);
  ASSERT_TRUE(preempted.ok());
  EXPECT_EQ(*preempted, (std::vector<int>{0, 1}));
  // Worker 2 trained 0..3, worker 0 4..6, worker 1 0 s.
  EXPECT_DOUBLE_EQ(c.reclaimed_seconds(), 5.0);
  EXPECT_DOUBLE_EQ(c.idle_seconds(), 0.0);
  // Next step: worker 3 connected, worker 2 is still gone.
  ASSERT_TRUE(c.set_absent({2}).ok());
  ASSERT_TRUE(c.begin_step(2, 10.0).ok());
  EXPECT_EQ(c.state(3), WorkerState::kGenerating);
  EXPECT_EQ(c.state(2), WorkerState::kIdle);
  EXPECT_FALSE(c.absent(3));
}

}  // namespace
}  // namespace tlt::cluster
