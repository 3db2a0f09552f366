// The rebalancer against an in-memory KubeClient, a fake Prometheus and a fake clock: an idle
// rollout pod is assigned after a full window and not before; hysteresis holds a decision for a
// window and suppresses flapping; minRolloutReplicas is honoured; Prometheus failing (or
// answering garbage) degrades without reassigning and recovers; DCGM percent values are scaled
// and their pod label used; the reconciler keeps the rebalancer's conditions.
#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>

#include "api/encode.h"
#include "api/manifest.h"
#include "operator/controller/job_status.h"
#include "operator/controller/log.h"
#include "operator/kube/fake_client.h"
#include "operator/rebalancer/fake_prometheus.h"
#include "operator/rebalancer/rebalancer.h"

namespace tlt::rebalancer {
namespace {

using controller::event_resource;
using controller::job_resource;
using controller::pod_resource;
using Json = nlohmann::json;
using std::chrono::seconds;

constexpr const char* kNs = "research";
constexpr const char* kJob = "qwen-math-grpo";
constexpr const char* kUrl = "http://prom.test:9090";

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string pod(int i) {
  return std::string(kJob) + "-rollout-" + std::to_string(i);
}

class RebalancerTest : public ::testing::Test {
 protected:
  RebalancerTest()
      : clock_(std::chrono::system_clock::from_time_t(1700000000)),
        rebalancer_(&kube_, &prom_, &clock_, &metrics_, RebalancerOptions{}) {
    controller::set_log_sink([this](const std::string& line) { logs_.push_back(line); });
    prom_.set_handler(
        [this](const std::string& url, const std::string& q) { return answer(url, q); });
  }
  ~RebalancerTest() override { controller::set_log_sink(nullptr); }

  // The cluster example as stored (uid uid-1), Running, with `rebalancing` merged into its spec,
  // and `n` running rollout pods plus a trainer pod.
  void add_job(const Json& rebalancing, int n) {
    StatusOr<api::Job> job =
        api::parse_job_yaml(read(std::string(TLT_SOURCE_DIR) + "/examples/rljob-cluster.yaml"));
    ASSERT_TRUE(job.ok()) << job.status().to_string();
    Json j = std::visit([](const auto& x) { return api::to_json(x); }, job.value());
    j["spec"]["rebalancing"] = {{"enabled", true},
                                {"idleBelow", 0.05},
                                {"window", "60s"},
                                {"interval", "15s"},
                                {"metric", "tlt_gpu_busy_ratio"},
                                {"podLabel", "pod"},
                                {"prometheusURL", kUrl},
                                {"minRolloutReplicas", 1}};
    if (rebalancing.is_object()) j["spec"]["rebalancing"].merge_patch(rebalancing);
    j["status"] = {{"phase", "Running"}};
    kube_.put(job_resource("RLJob", kNs), j);
    uid_ = kube_.get(job_resource("RLJob", kNs), kJob)->at("metadata").at("uid");
    for (int i = 0; i < n; ++i) add_pod("rollout", i);
    add_pod("trainer", 0);
  }
  void add_pod(const std::string& role, int i) {
    Json p = {
        {"apiVersion", "v1"},
        {"kind", "Pod"},
        {"metadata",
         {{"name", std::string(kJob) + "-" + role + "-" + std::to_string(i)},
          {"namespace", kNs},
          {"labels",
           {{"tlt.dev/job", kJob}, {"tlt.dev/role", role}, {"tlt.dev/index", std::to_string(i)}}},
          {"ownerReferences",
           {{{"apiVersion", "tlt.dev/v1alpha1"},
             {"kind", "RLJob"},
             {"name", kJob},
             {"uid", uid_},
             {"controller", true}}}}}},
        {"status", {{"phase", "Running"}}}};
    kube_.put(pod_resource(kNs), p);
  }

  // What the fake Prometheus answers: per pod the highest and lowest value over the window (in
  // the metric's unit), labelled with `label_`.
  StatusOr<std::vector<Sample>> answer(const std::string& url, const std::string& q) {
    if (!failure_.ok()) return failure_;
    if (!garbage_.empty()) return parse_query_response(200, garbage_, "query " + url);
    bool idle_query = q.find("max_over_time(") != std::string::npos;
    std::vector<Sample> out;
    for (const auto& [name, v] : util_) {
      Sample s;
      s.labels = {{label_, name}};
      s.value = idle_query ? v.first : v.second;
      out.push_back(s);
    }
    return out;
  }
  void set_util(int i, double v) { util_[pod(i)] = {v, v}; }
  void set_util(int i, double highest, double lowest) { util_[pod(i)] = {highest, lowest}; }

  // tick() at now, then the clock moves on by `step`.
  void tick_and_advance(int step = 15) {
    rebalancer_.tick();
    clock_.advance(seconds(step));
  }
  int elapsed() const {
    return static_cast<int>(std::chrono::duration_cast<seconds>(
                                clock_.now() - std::chrono::system_clock::from_time_t(1700000000))
                                .count());
  }
  std::string assignment(int i) {
    StatusOr<Json> p = kube_.get(pod_resource(kNs), pod(i));
    if (!p.ok()) return "(no pod)";
    return (*p)["metadata"].value("annotations", Json::object()).value(kAssignmentAnnotation, "");
  }
  std::vector<std::string> assigned() {
    std::vector<std::string> out;
    for (const Json& p : kube_.objects(pod_resource(kNs))) {
      if (p["metadata"].value("annotations", Json::object()).value(kAssignmentAnnotation, "") ==
          "drafter")
        out.push_back(p["metadata"]["name"]);
    }
    return out;
  }
  std::string condition(const std::string& type, const std::string& field) {
    StatusOr<Json> j = kube_.get(job_resource("RLJob", kNs), kJob);
    for (const Json& c : (*j)["status"].value("conditions", Json::array())) {
      if (c["type"] == type) return c.value(field, "");
    }
    return "(none)";
  }
  // Reasons of the Events recorded on the job, in order of creation.
  std::vector<std::string> events(const std::string& reason = "") {
    std::vector<std::string> out;
    for (const Json& e : kube_.objects(event_resource(kNs))) {
      EXPECT_EQ(e["involvedObject"]["name"], kJob);
      EXPECT_EQ(e["involvedObject"]["uid"], uid_);
      if (reason.empty() || e["reason"] == reason) out.push_back(e["message"]);
    }
    return out;
  }
  std::string metric_line(const std::string& prefix) {
    std::istringstream in(metrics_.render());
    for (std::string line; std::getline(in, line);) {
      if (line.rfind(prefix, 0) == 0) return line;
    }
    return "(none)";
  }

  kube::FakeKubeClient kube_;
  FakePrometheus prom_;
  controller::FakeClock clock_;
  controller::OperatorMetrics metrics_;
  Rebalancer rebalancer_;
  std::vector<std::string> logs_;
  std::string uid_;
  std::map<std::string, std::pair<double, double>> util_;  // pod -> (highest, lowest)
  std::string label_ = "pod";
  Status failure_;
  std::string garbage_;
};

TEST_F(RebalancerTest, Rebalance_IdlePod_AssignedAfterFullWindowNotBefore) {
  add_job({}, 4);
  for (int i = 0; i < 4; ++i) set_util(i, i == 2 ? 0.0 : 0.9);
  while (elapsed() < 60) {
    tick_and_advance();
    EXPECT_TRUE(assigned().empty()) << "assigned before a full window, at t=" << elapsed();
  }
  ASSERT_EQ(elapsed(), 60);
  rebalancer_.tick();
  EXPECT_EQ(assigned(), std::vector<std::string>{pod(2)});
  EXPECT_EQ(assignment(2), "drafter");

  std::vector<std::string> ev = events("PodAssignedToDrafter");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_NE(ev[0].find(pod(2)), std::string::npos) << ev[0];
  EXPECT_EQ(metric_line("tlt_operator_rebalancer_decisions_total{"),
            "tlt_operator_rebalancer_decisions_total{action=\"assign_drafter\",job=\"" +
                std::string(kJob) + "\",namespace=\"research\"} 1");
  EXPECT_EQ(condition(kAssignedCondition, "status"), "True");
  EXPECT_NE(condition(kAssignedCondition, "message").find(pod(2)), std::string::npos);
  EXPECT_EQ(condition(kDegradedCondition, "status"), "False");

  // The queries: the runtime's gauge of this job's rollout pods, max/min over the window.
  std::vector<std::pair<std::string, std::string>> q = prom_.queries();
  ASSERT_GE(q.size(), 2u);
  EXPECT_EQ(q[0].first, kUrl);
  EXPECT_EQ(q[0].second,
            "max by (pod) (max_over_time(tlt_gpu_busy_ratio{job=\"qwen-math-grpo\","
            "pod=~\"qwen-math-grpo-rollout-[0-9]+\"}[60s]))");
  EXPECT_EQ(q[1].second,
            "max by (pod) (min_over_time(tlt_gpu_busy_ratio{job=\"qwen-math-grpo\","
            "pod=~\"qwen-math-grpo-rollout-[0-9]+\"}[60s]))");
}

TEST_F(RebalancerTest, Rebalance_EveryInterval_QueriesOncePerInterval) {
  add_job({}, 2);
  set_util(0, 0.9);
  set_util(1, 0.9);
  std::chrono::milliseconds wait = rebalancer_.tick();
  EXPECT_EQ(prom_.queries().size(), 2u);
  EXPECT_EQ(wait, std::chrono::milliseconds(10000)) << "min(interval 15 s, discovery 10 s)";
  clock_.advance(seconds(10));
  wait = rebalancer_.tick();
  EXPECT_EQ(prom_.queries().size(), 2u) << "the interval (15 s) has not passed";
  EXPECT_EQ(wait, std::chrono::milliseconds(5000));
  clock_.advance(seconds(5));
  rebalancer_.tick();
  EXPECT_EQ(prom_.queries().size(), 4u);
}

TEST_F(RebalancerTest, Rebalance_AssignedPod_StaysAWindowAndReturnsOnlyWhenBusyAWindow) {
  add_job({}, 3);
  for (int i = 0; i < 3; ++i) set_util(i, i == 1 ? 0.0 : 0.9);
  while (elapsed() <= 60) tick_and_advance();  // assigned at t=60
  ASSERT_EQ(assigned(), std::vector<std::string>{pod(1)});
  // The others saturated at once (rollout capacity short): it stays assigned for one more
  // window (t=75..105), returns at t=120. Its own utilisation (training) does not matter.
  set_util(0, 1.0);
  set_util(2, 1.0);
  while (elapsed() < 120) {
    tick_and_advance();
    EXPECT_EQ(assignment(1), "drafter")
        << "returned within a window of its assignment, t=" << elapsed();
  }
  tick_and_advance();
  EXPECT_EQ(assignment(1), "") << "the others above 1-idleBelow for a window: returned";
  EXPECT_EQ(events("PodReturnedToRollout").size(), 1u);
  EXPECT_EQ(condition(kAssignedCondition, "status"), "False");
  // Idle again at once: not taken back within a window of its return (t=120).
  set_util(0, 0.9);
  set_util(2, 0.9);
  set_util(1, 0.0);
  while (elapsed() < 180) {
    tick_and_advance();
    EXPECT_EQ(assignment(1), "") << "reassigned within a window of its return, t=" << elapsed();
  }
  tick_and_advance();
  EXPECT_EQ(assignment(1), "drafter");
  EXPECT_NE(metric_line("tlt_operator_rebalancer_decisions_total{action=\"return_rollout\""),
            "(none)");
}

TEST_F(RebalancerTest, Rebalance_FlappingPod_AtMostOneDecisionPerWindow) {
  add_job({}, 3);
  set_util(0, 0.9);
  set_util(1, 0.9);
  // A pod that flips between idle and busy at every look (harsher than any real window).
  std::vector<int> decided_at;
  std::string before = assignment(2);
  for (int k = 0; elapsed() <= 600; ++k) {
    set_util(2, k % 2 ? 0.9 : 0.0);
    tick_and_advance();
    if (assignment(2) != before) decided_at.push_back(elapsed() - 15);
    before = assignment(2);
  }
  ASSERT_FALSE(decided_at.empty());
  for (size_t i = 1; i < decided_at.size(); ++i)
    EXPECT_GE(decided_at[i] - decided_at[i - 1], 60) << "two decisions within one window";
  // And a pod whose window holds both (highest 0.9, lowest 0.0) is neither idle nor busy.
  set_util(0, 0.9, 0.0);
  std::string a0 = assignment(0);
  for (int k = 0; k < 20; ++k) tick_and_advance();
  EXPECT_EQ(assignment(0), a0);
  // A pod between idleBelow and 2*idleBelow is not idle.
  set_util(1, 0.07);
  std::string a1 = assignment(1);
  for (int k = 0; k < 20; ++k) tick_and_advance();
  EXPECT_EQ(assignment(1), a1);
}

TEST_F(RebalancerTest, Rebalance_AllIdle_KeepsMinRolloutReplicas) {
  add_job({{"minRolloutReplicas", 3}}, 4);
  for (int i = 0; i < 4; ++i) set_util(i, 0.0);
  for (int k = 0; k < 20; ++k) tick_and_advance();
  EXPECT_EQ(assigned(), std::vector<std::string>{pod(3)}) << "4 pods, keep 3: the highest index";
  EXPECT_EQ(events("PodAssignedToDrafter").size(), 1u);
  bool logged = false;
  for (const std::string& l : logs_)
    logged |= l.find("minRolloutReplicas would be broken") != std::string::npos;
  EXPECT_TRUE(logged);
}

TEST_F(RebalancerTest, Rebalance_PrometheusFails_DegradedNoReassignmentThenRecovers) {
  add_job({}, 3);
  for (int i = 0; i < 3; ++i) set_util(i, i == 0 ? 0.0 : 0.9);
  while (elapsed() < 60) tick_and_advance();
  // At t=60 the idle pod would be assigned, but Prometheus is down.
  failure_ = Status::Unavailable("query http://prom.test:9090: Connection refused");
  tick_and_advance();
  EXPECT_TRUE(assigned().empty());
  EXPECT_EQ(condition(kDegradedCondition, "status"), "True");
  EXPECT_EQ(condition(kDegradedCondition, "reason"), "PrometheusQueryFailed");
  EXPECT_NE(condition(kDegradedCondition, "message").find("Connection refused"), std::string::npos);
  EXPECT_EQ(metric_line("tlt_operator_prometheus_query_errors_total"),
            "tlt_operator_prometheus_query_errors_total 1");
  EXPECT_EQ(events(kDegradedCondition).size(), 1u);
  // Garbage instead of JSON: still degraded, still nothing reassigned; one Warning Event only.
  failure_ = Status::Ok();
  garbage_ = "<html>502 Bad Gateway</html>";
  tick_and_advance();
  EXPECT_TRUE(assigned().empty());
  EXPECT_NE(condition(kDegradedCondition, "message").find("not JSON"), std::string::npos);
  EXPECT_EQ(metric_line("tlt_operator_prometheus_query_errors_total"),
            "tlt_operator_prometheus_query_errors_total 2");
  EXPECT_EQ(events(kDegradedCondition).size(), 1u);
  // Recovery at t=90: the condition clears; the idle pod waits a window of readable data.
  garbage_.clear();
  tick_and_advance();
  EXPECT_EQ(condition(kDegradedCondition, "status"), "False");
  EXPECT_EQ(condition(kDegradedCondition, "reason"), "QueriesSucceeded");
  EXPECT_EQ(events("RebalancerRecovered").size(), 1u);
  while (elapsed() < 150) {  // a window after queries worked again (t=90)
    tick_and_advance();
    EXPECT_TRUE(assigned().empty()) << "t=" << elapsed();
  }
  tick_and_advance();
  EXPECT_EQ(assigned(), std::vector<std::string>{pod(0)});
  bool logged = false;
  for (const std::string& l : logs_) {
    logged |= l.find("level=error") != std::string::npos &&
              l.find("Prometheus query failed") != std::string::npos &&
              l.find("prometheus=http://prom.test:9090") != std::string::npos;
  }
  EXPECT_TRUE(logged);
}

TEST_F(RebalancerTest, Rebalance_OperatorURL_OverridesSpec) {
  Rebalancer r(&kube_, &prom_, &clock_, &metrics_, RebalancerOptions{"", "http://override:9090"});
  add_job({}, 2);
  r.tick();
  ASSERT_FALSE(prom_.queries().empty());
  EXPECT_EQ(prom_.queries()[0].first, "http://override:9090");
  EXPECT_EQ(condition(kDegradedCondition, "status"), "False");
  EXPECT_NE(condition(kDegradedCondition, "message").find("http://override:9090"),
            std::string::npos);
}

TEST_F(RebalancerTest, Rebalance_DCGMPercent_ScaledAndPodLabelUsed) {
  add_job({{"metric", "DCGM_FI_DEV_GPU_UTIL"}, {"podLabel", "exported_pod"}}, 4);
  label_ = "exported_pod";
  set_util(0, 50.0);
  set_util(1, 3.0);  // 3 % = 0.03 < 0.05: idle (unscaled, 3.0 would be busy)
  set_util(2, 8.0);  // 8 % = 0.08 >= 0.05: not idle
  set_util(3, 50.0);
  for (int k = 0; k <= 4; ++k) tick_and_advance();
  EXPECT_EQ(assigned(), std::vector<std::string>{pod(1)});
  std::string q = prom_.queries().at(0).second;
  EXPECT_EQ(q,
            "max by (exported_pod) (max_over_time(DCGM_FI_DEV_GPU_UTIL{exported_namespace="
            "\"research\",exported_pod=~\"qwen-math-grpo-rollout-[0-9]+\"}[60s]))");
  std::vector<std::string> ev = events("PodAssignedToDrafter");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_NE(ev[0].find("highest 0.030"), std::string::npos) << ev[0];
}

TEST_F(RebalancerTest, Rebalance_DCGMEngineActive_NotScaled) {
  api::RebalancingSpec spec;
  spec.metric = "DCGM_FI_PROF_GR_ENGINE_ACTIVE";
  UtilisationQueries q = utilisation_queries(spec, "ns", "a.b");
  EXPECT_EQ(q.scale, 1.0);
  EXPECT_EQ(q.pod_label, "pod");
  EXPECT_NE(q.idle.find("{namespace=\"ns\",pod=~\"a\\\\.b-rollout-[0-9]+\"}"), std::string::npos)
      << q.idle;
}

TEST_F(RebalancerTest, Rebalance_DisabledOrSuspended_NoQueries) {
  add_job({{"enabled", false}}, 2);
  rebalancer_.tick();
  EXPECT_TRUE(prom_.queries().empty());
  Json j = *kube_.get(job_resource("RLJob", kNs), kJob);
  j["spec"]["rebalancing"]["enabled"] = true;
  j["status"]["phase"] = "Suspended";
  kube_.put(job_resource("RLJob", kNs), j);
  rebalancer_.tick();
  EXPECT_TRUE(prom_.queries().empty());
}

TEST_F(RebalancerTest, Reconcile_StatusWithRebalancerConditions_KeepsThem) {
  Json old = {
      {"conditions",
       {{{"type", "Running"}, {"status", "True"}},
        {{"type", kDegradedCondition}, {"status", "True"}, {"reason", "PrometheusQueryFailed"}}}}};
  controller::Outcome o;
  o.created = true;
  Json computed = controller::compute_status("RLJob", old, o, 1, clock_.now());
  int n = 0;
  for (const Json& c : computed["conditions"]) {
    if (c["type"] == kDegradedCondition) {
      ++n;
      EXPECT_EQ(c["status"], "True");
    }
  }
  EXPECT_EQ(n, 1) << computed.dump();
  EXPECT_EQ(computed["conditions"].size(), 6u);
}

}  // namespace
}  // namespace tlt::rebalancer
