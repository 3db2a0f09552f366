// The controller's parts that need no apiserver: the rate limiter and work queue, Lease leader
// election against the in-memory client, the metrics text, the log line format.
#include <thread>

#include <gtest/gtest.h>

#include "operator/controller/leader.h"
#include "operator/controller/log.h"
#include "operator/controller/metrics.h"
#include "operator/controller/work_queue.h"
#include "kube/fake_client.h"

namespace tlt::controller {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(RateLimiter, PerKeyBackoff_DoublesToCapAndForgetResets) {
  RateLimiter rl({milliseconds(5), seconds(1), 1000, 1000});
  SteadyTime t{};
  EXPECT_EQ(rl.when("a", t), milliseconds(5));
  EXPECT_EQ(rl.when("a", t), milliseconds(10));
  EXPECT_EQ(rl.when("a", t), milliseconds(20));
  EXPECT_EQ(rl.when("b", t), milliseconds(5)) << "keys back off independently";
  for (int i = 0; i < 20; ++i) rl.when("a", t);
  EXPECT_EQ(rl.when("a", t), seconds(1)) << "capped";
  EXPECT_EQ(rl.failures("a"), 24);
  rl.forget("a");
  EXPECT_EQ(rl.failures("a"), 0);
  EXPECT_EQ(rl.when("a", t), milliseconds(5));
}

TEST(RateLimiter, TokenBucket_BurstThenQps) {
  RateLimiter rl({std::chrono::nanoseconds(1), milliseconds(1), 10, 3});  // 10/s, burst 3
  SteadyTime t{};
  for (int i = 0; i < 3; ++i) EXPECT_LE(rl.when("k" + std::to_string(i), t), milliseconds(1));
  EXPECT_EQ(std::chrono::duration_cast<milliseconds>(rl.when("x", t)), milliseconds(100));
  EXPECT_EQ(std::chrono::duration_cast<milliseconds>(rl.when("y", t)), milliseconds(200));
  // A second later the bucket has refilled (to its burst, not beyond).
  EXPECT_LE(rl.when("z", t + seconds(1)), milliseconds(1));
}

TEST(WorkQueue, Add_SameKeyTwice_QueuedOnce) {
  WorkQueue q;
  q.add("a");
  q.add("a");
  q.add("b");
  EXPECT_EQ(q.depth(), 2u);
  std::string k;
  ASSERT_TRUE(q.get(&k));
  EXPECT_EQ(k, "a");
  q.done(k);
  ASSERT_TRUE(q.get(&k));
  EXPECT_EQ(k, "b");
  q.done(k);
  EXPECT_EQ(q.depth(), 0u);
}

TEST(WorkQueue, AddWhileProcessing_RequeuedOnDoneNotHandedTwice) {
  WorkQueue q;
  q.add("a");
  std::string k;
  ASSERT_TRUE(q.get(&k));
  q.add("a");
  EXPECT_EQ(q.depth(), 0u) << "not handed to a second worker while being processed";
  q.done("a");
  EXPECT_EQ(q.depth(), 1u);
  ASSERT_TRUE(q.get(&k));
  EXPECT_EQ(k, "a");
}

TEST(WorkQueue, AddAfter_WaitsThenReady_EarliestWins) {
  WorkQueue q;
  q.add_after("late", milliseconds(300));
  q.add_after("soon", milliseconds(30));
  q.add_after("late", milliseconds(60));  // earlier time wins
  EXPECT_EQ(q.depth(), 0u);
  EXPECT_EQ(q.delayed(), 2u);
  auto t0 = std::chrono::steady_clock::now();
  std::string k;
  ASSERT_TRUE(q.get(&k));
  EXPECT_EQ(k, "soon");
  q.done(k);
  ASSERT_TRUE(q.get(&k));
  EXPECT_EQ(k, "late");
  auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, milliseconds(55));
  EXPECT_LT(waited, milliseconds(250));
}

TEST(WorkQueue, ShutDown_WakesBlockedGet) {
  WorkQueue q;
  std::thread t([&] {
    std::this_thread::sleep_for(milliseconds(50));
    q.shut_down();
  });
  std::string k;
  EXPECT_FALSE(q.get(&k));
  t.join();
}

TEST(WorkQueue, RateLimited_BackoffGrowsPerFailure) {
  WorkQueue q({milliseconds(20), seconds(1), 1000, 1000});
  q.add_rate_limited("a");  // 20 ms
  q.add_rate_limited("a");  // 40 ms, but the earlier pending time wins
  EXPECT_EQ(q.failures("a"), 2);
  std::string k;
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(q.get(&k));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, milliseconds(15));
  q.done(k);
  q.forget("a");
  EXPECT_EQ(q.failures("a"), 0);
}

class LeaderTest : public ::testing::Test {
 protected:
  LeaderOptions options(const std::string& id) {
    LeaderOptions o;
    o.namespace_ = "tlt-system";
    o.identity = id;
    o.lease_duration = seconds(15);
    return o;
  }
  nlohmann::json lease() {
    StatusOr<nlohmann::json> l =
        kube_.get({"coordination.k8s.io", "v1", "leases", "tlt-system"}, "tlt-operator");
    return l.ok() ? *l : nlohmann::json();
  }
  kube::FakeKubeClient kube_;
  FakeClock clock_{std::chrono::system_clock::from_time_t(1700000000)};
};

TEST_F(LeaderTest, TwoReplicas_OneLeads_OtherTakesOverOnlyAfterExpiry) {
  LeaderElector a(&kube_, &clock_, options("a")), b(&kube_, &clock_, options("b"));
  StatusOr<bool> la = a.try_acquire_or_renew();
  ASSERT_TRUE(la.ok()) << la.status().to_string();
  EXPECT_TRUE(*la);
  EXPECT_FALSE(*b.try_acquire_or_renew());
  EXPECT_EQ(lease()["spec"]["holderIdentity"], "a");
  EXPECT_EQ(lease()["spec"]["renewTime"], "2023-11-14T22:13:20.000000Z");
  // a renews; b keeps waiting even well past 15 s from the first record.
  for (int i = 0; i < 10; ++i) {
    clock_.advance(seconds(2));
    EXPECT_TRUE(*a.try_acquire_or_renew());
    EXPECT_FALSE(*b.try_acquire_or_renew());
  }
  // a dies: b takes over once 15 s passed since b saw the record change.
  clock_.advance(seconds(14));
  EXPECT_FALSE(*b.try_acquire_or_renew());
  clock_.advance(seconds(2));
  EXPECT_TRUE(*b.try_acquire_or_renew());
  EXPECT_EQ(lease()["spec"]["holderIdentity"], "b");
  EXPECT_EQ(lease()["spec"]["leaseTransitions"], 1);
  EXPECT_FALSE(*a.try_acquire_or_renew()) << "a, back, sees b's fresh lease";
}

TEST_F(LeaderTest, Release_OtherTakesOverAtOnce) {
  LeaderElector a(&kube_, &clock_, options("a")), b(&kube_, &clock_, options("b"));
  ASSERT_TRUE(*a.try_acquire_or_renew());
  EXPECT_FALSE(*b.try_acquire_or_renew());
  a.release();
  EXPECT_TRUE(*b.try_acquire_or_renew());
}

TEST_F(LeaderTest, RaceOnExpiredLease_ConflictLosesTheRound) {
  LeaderElector a(&kube_, &clock_, options("a"));
  ASSERT_TRUE(*a.try_acquire_or_renew());
  kube_.fail_next("patch", Status::Aborted("the object has been modified"));
  clock_.advance(seconds(2));
  StatusOr<bool> r = a.try_acquire_or_renew();
  EXPECT_EQ(r.status().code(), StatusCode::kAborted);
}

TEST(OperatorMetrics, Render_HasReconcileQueueAndPhaseSeries) {
  OperatorMetrics m;
  m.observe_reconcile("RLJob", true, 0.003);
  m.observe_reconcile("RLJob", false, 0.2);
  m.set_job_phase("RLJob/a/x", "RLJob", "Running");
  m.set_job_phase("RLJob/a/y", "RLJob", "Running");
  m.set_job_phase("RLJob/a/z", "RLJob", "Running");
  m.set_job_phase("RLJob/a/z", "RLJob", "");  // gone
  m.set_depth_source([] { return 7.0; });
  std::string text = m.render();
  EXPECT_NE(text.find("tlt_operator_reconcile_total{kind=\"RLJob\",result=\"success\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("tlt_operator_reconcile_total{kind=\"RLJob\",result=\"error\"} 1"),
            std::string::npos);
  EXPECT_NE(text.find("tlt_operator_reconcile_duration_seconds_count{kind=\"RLJob\"} 2"),
            std::string::npos);
  EXPECT_NE(text.find("tlt_operator_jobs{kind=\"RLJob\",phase=\"Running\"} 2"), std::string::npos);
  EXPECT_NE(text.find("tlt_operator_jobs{kind=\"TSTPretrainJob\",phase=\"Failed\"} 0"),
            std::string::npos);
  EXPECT_NE(text.find("tlt_operator_workqueue_depth 7"), std::string::npos);
}

TEST(OperatorMetrics, DeclaredWatch_ReadsZeroUntilARestart) {
  OperatorMetrics m;
  m.declare_watch("pods");
  std::string text = m.render();
  for (const char* reason : {"gone", "error"})
    EXPECT_NE(text.find(std::string("tlt_operator_watch_restarts_total{reason=\"") + reason +
                        "\",resource=\"pods\"} 0"),
              std::string::npos)
        << text;
  m.add_watch_restart("pods", "gone");
  m.declare_watch("pods");  // again (a relist): the count stays
  EXPECT_NE(
      m.render().find("tlt_operator_watch_restarts_total{reason=\"gone\",resource=\"pods\"} 1"),
      std::string::npos);
}

TEST(Log, Format_KeyValueWithQuotedSentence) {
  std::string line = format_log("info", "Created a pod.", {{"pod", "x-0"}, {"why", "a b"}});
  EXPECT_NE(line.find(" level=info msg=\"Created a pod.\" pod=x-0 why=\"a b\""), std::string::npos)
      << line;
  EXPECT_EQ(line.rfind("time=", 0), 0u);
}

}  // namespace
}  // namespace tlt::controller
