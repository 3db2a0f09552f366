// The rebalancer against an in-memory KubeClient, a fake Prometheus and a fake clock: an idle
// rollout pod is assigned after a full window and not before; hysteresis holds a decision for a
// window and suppresses flapping; minRolloutReplicas is honoured; Prometheus failing (or
// answering garbage) degrades without reassigning and recovers; DCGM percent values are scaled
// and their pod label used; the reconciler keeps the rebalancer's conditions. Dedicated drafter
// pods: added one a window while the drafter starves, up to maxReplicas; removed (only those the
// rebalancer added, never below minReplicas) when rollout pods are idle again; no flapping; the
// record on the job survives an operator restart; a user's edit of replicas is adopted, not
// fought; the reconciler creates and deletes the pods.
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>

#include "api/encode.h"
#include "api/manifest.h"
#include "operator/controller/cache.h"
#include "operator/controller/events.h"
#include "operator/controller/job_status.h"
#include "operator/controller/kueue.h"
#include "operator/controller/log.h"
#include "operator/controller/reconciler.h"
#include "operator/controller/reward_sidecar.h"
#include "kube/fake_client.h"
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
        rebalancer_(&kube_, &cache_, &prom_, &clock_, &metrics_,
                    RebalancerOptions{"", "", {kUrl}}) {
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
    if (!garbage_.empty()) return parse_query_response(200, "text/plain", garbage_, "query " + url);
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
    tick();
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
  // Dedicated drafter pods: the stored spec.roles.drafter, merged with `patch` (as kubectl
  // edit would: no resourceVersion), and read back.
  void edit_drafter_role(const Json& patch) {
    patch_job({{"spec", {{"roles", {{"drafter", patch}}}}}});
  }
  void patch_job(const Json& patch) {
    StatusOr<Json> out = kube_.patch(job_resource("RLJob", kNs), kJob, patch);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
  }
  void patch_pod(int i, const Json& patch) {
    StatusOr<Json> out = kube_.patch(pod_resource(kNs), pod(i), patch);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
  }
  int drafter_replicas() {
    return kube_.get(job_resource("RLJob", kNs), kJob)
        ->at("spec")["roles"]["drafter"]
        .value("replicas", -1);
  }
  // The rebalancer's record (annotation tlt.dev/drafter-scaling), {} when none.
  Json record() {
    Json meta = kube_.get(job_resource("RLJob", kNs), kJob)->at("metadata");
    std::string text =
        meta.value("annotations", Json::object()).value(kDrafterScalingAnnotation, "");
    return text.empty() ? Json::object() : Json::parse(text);
  }
  void saturate(int n) {
    for (int i = 0; i < n; ++i) set_util(i, 1.0, 0.97);
  }
  // Ticks every 15 s until `until` (exclusive) and returns (time, replicas) at every change.
  std::vector<std::pair<int, int>> run_until(int until, Rebalancer* r = nullptr) {
    std::vector<std::pair<int, int>> changes;
    int before = drafter_replicas();
    while (elapsed() < until) {
      int t = elapsed();
      tick(r);
      clock_.advance(seconds(15));
      if (drafter_replicas() != before) changes.push_back({t, drafter_replicas()});
      before = drafter_replicas();
    }
    return changes;
  }
  int count_logs(const std::string& needle) const {
    int n = 0;
    for (const std::string& l : logs_) n += l.find(needle) != std::string::npos;
    return n;
  }

  // The informer cache from the fake apiserver (jobs and their owned objects).
  void sync() {
    std::vector<kube::Resource> all = {job_resource("RLJob", "")};  // first: children need it
    for (const kube::Resource& r : controller::owned_resources("")) all.push_back(r);
    all.push_back(controller::workload_resource(""));
    for (const kube::Resource& r : all) {
      kube::ListOptions lo;
      if (r.plural != "rljobs") lo.label_selector = controller::kJobLabel;
      StatusOr<kube::ObjectList> list = kube_.list(r, lo);
      ++sync_lists_;
      ASSERT_TRUE(list.ok());
      cache_.store(r.plural)->replace(list->items, list->resource_version);
    }
  }
  // One tick of `r` (default rebalancer_) on a freshly synced cache.
  std::chrono::milliseconds tick(Rebalancer* r = nullptr) {
    sync();
    return (r ? r : &rebalancer_)->tick();
  }

  kube::FakeKubeClient kube_;
  FakePrometheus prom_;
  controller::FakeClock clock_;
  controller::OperatorMetrics metrics_;
  controller::Cache cache_{true};  // filled from kube_ before each tick, as the informers
                                  // would; Workloads too (the operator's --kueue)
  int sync_lists_ = 0;       // lists made by sync(), not by the rebalancer
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
  tick();
  EXPECT_EQ(assigned(), std::vector<std::string>{pod(2)});
  EXPECT_EQ(assignment(2), "drafter");

  std::vector<std::string> ev = events("PodAssignedToDrafter");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_NE(ev[0].find(pod(2)), std::string::npos) << ev[0];
  // Every action's series exists from the first look (at 0), so increase() sees the decision.
  EXPECT_EQ(metric_line("tlt_operator_rebalancer_decisions_total{action=\"assign_drafter\""),
            "tlt_operator_rebalancer_decisions_total{action=\"assign_drafter\",job=\"" +
                std::string(kJob) + "\",namespace=\"research\"} 1");
  EXPECT_EQ(metric_line("tlt_operator_rebalancer_decisions_total{action=\"return_rollout\""),
            "tlt_operator_rebalancer_decisions_total{action=\"return_rollout\",job=\"" +
                std::string(kJob) + "\",namespace=\"research\"} 0");
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

// The decision series of a job (labels a job author chooses) go with the job: a finished job
// keeps them, a deleted one does not, so the operator's /metrics stays bounded by the jobs that
// exist.
TEST_F(RebalancerTest, Rebalance_JobDeleted_ItsDecisionSeriesRemoved) {
  auto series = [this] {
    int n = 0;
    std::istringstream in(metrics_.render());
    for (std::string line; std::getline(in, line);) {
      n += line.rfind("tlt_operator_rebalancer_decisions_total{", 0) == 0 &&
           line.find("job=\"" + std::string(kJob) + "\"") != std::string::npos;
    }
    return n;
  };
  add_job({}, 2);
  for (int i = 0; i < 2; ++i) set_util(i, 0.0);
  while (elapsed() <= 60) tick_and_advance();
  ASSERT_FALSE(assigned().empty()) << "a decision was counted";
  EXPECT_EQ(series(), 4) << "every action's series";
  patch_job({{"status", {{"phase", "Succeeded"}}}});
  tick_and_advance();
  EXPECT_EQ(series(), 4) << "a finished job's counts stay readable";
  ASSERT_TRUE(kube_.remove(job_resource("RLJob", kNs), kJob).ok());
  tick_and_advance();
  EXPECT_EQ(series(), 0) << metrics_.render();
}

TEST_F(RebalancerTest, Rebalance_EveryInterval_QueriesOncePerInterval) {
  add_job({}, 2);
  set_util(0, 0.9);
  set_util(1, 0.9);
  std::chrono::milliseconds wait = tick();
  EXPECT_EQ(prom_.queries().size(), 2u);
  EXPECT_EQ(wait, std::chrono::milliseconds(10000)) << "min(interval 15 s, discovery 10 s)";
  clock_.advance(seconds(10));
  wait = tick();
  EXPECT_EQ(prom_.queries().size(), 2u) << "the interval (15 s) has not passed";
  EXPECT_EQ(wait, std::chrono::milliseconds(5000));
  clock_.advance(seconds(5));
  tick();
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
  EXPECT_NE(condition(kDegradedCondition, "message").find("not the JSON"), std::string::npos);
  EXPECT_EQ(condition(kDegradedCondition, "message").find("Bad Gateway"), std::string::npos)
      << "no part of the answer";
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

TEST_F(RebalancerTest, Rebalance_EveryInterval_ReadsJobsAndPodsFromTheCacheNeverLists) {
  add_job({}, 3);
  for (int i = 0; i < 3; ++i) set_util(i, 0.0);
  kube_.reset_calls();
  sync_lists_ = 0;
  run_until(300);  // 20 intervals; pods assigned along the way
  EXPECT_GT(kube_.calls("patch", "pods"), 0) << "it did rebalance";
  EXPECT_EQ(kube_.calls("list"), sync_lists_) << "every list was the test's own sync()";
  // sync()'s: the jobs, the owned types and the Workloads
  const int types = 2 + static_cast<int>(controller::owned_resources("").size());
  EXPECT_EQ(kube_.calls("list", "pods"), sync_lists_ / types);
}

TEST_F(RebalancerTest, Rebalance_SpecURLNotAllowed_OperatorDefaultQueriedWarnedOnce) {
  Rebalancer r(&kube_, &cache_, &prom_, &clock_, &metrics_,
               RebalancerOptions{"", "http://default:9090", {}});
  add_job({}, 2);
  tick(&r);
  ASSERT_FALSE(prom_.queries().empty());
  for (const auto& [url, q] : prom_.queries()) EXPECT_EQ(url, "http://default:9090");
  EXPECT_EQ(condition(kDegradedCondition, "status"), "False");
  EXPECT_NE(condition(kDegradedCondition, "message").find("http://default:9090"),
            std::string::npos);
  ASSERT_EQ(events("PrometheusURLNotAllowed").size(), 1u);
  EXPECT_NE(events("PrometheusURLNotAllowed")[0].find("--prometheus-url-allow"), std::string::npos);
  clock_.advance(seconds(15));
  tick(&r);
  EXPECT_EQ(events("PrometheusURLNotAllowed").size(), 1u) << "once per URL";
}

TEST_F(RebalancerTest, Rebalance_SpecURLNotAllowedNoDefault_DegradedNeverFetched) {
  Rebalancer r(&kube_, &cache_, &prom_, &clock_, &metrics_, RebalancerOptions{});
  add_job({{"prometheusURL", "http://metadata.internal/latest"}}, 2);
  tick(&r);
  EXPECT_TRUE(prom_.queries().empty()) << "a URL not allowed is never fetched";
  EXPECT_EQ(condition(kDegradedCondition, "status"), "True");
  EXPECT_EQ(condition(kDegradedCondition, "reason"), "PrometheusURLNotAllowed");
  EXPECT_NE(condition(kDegradedCondition, "message").find("allow-list"), std::string::npos);
}

TEST_F(RebalancerTest, Rebalance_SpecURLAllowed_UsedOverDefault) {
  Rebalancer r(&kube_, &cache_, &prom_, &clock_, &metrics_,
               RebalancerOptions{"", "http://default:9090", {"http://prom.test:9090/"}});
  add_job({{"prometheusURL", "http://prom.test:9090/tenant-a"}}, 2);
  tick(&r);
  ASSERT_FALSE(prom_.queries().empty());
  EXPECT_EQ(prom_.queries()[0].first, "http://prom.test:9090/tenant-a");
  EXPECT_TRUE(events("PrometheusURLNotAllowed").empty());
}

TEST(PrometheusURL, Allowed_EqualOrBelowAnEntryOnly) {
  const std::vector<std::string> allow = {"http://prom:9090/", "https://thanos.example/q"};
  for (const char* ok : {"http://prom:9090", "http://prom:9090/", "http://prom:9090/x/y",
                         "https://thanos.example/q", "https://thanos.example/q/r"})
    EXPECT_TRUE(prometheus_url_allowed(ok, allow)) << ok;
  for (const char* bad : {"http://prom:9090.evil.example", "http://prom:9090@evil.example/",
                          "http://prom:90901", "https://prom:9090", "http://prom",
                          "https://thanos.example/qq", "https://thanos.example", ""})
    EXPECT_FALSE(prometheus_url_allowed(bad, allow)) << bad;
  EXPECT_FALSE(prometheus_url_allowed("http://a", {}));
  EXPECT_FALSE(prometheus_url_allowed("/", {"", "/"})) << "empty entries allow nothing";
}

// --reward-url-allow mirrors --prometheus-url-allow (reward_sidecar.h): one rule for both.
TEST(PrometheusURL, RewardURLAllowList_SameRule) {
  const std::vector<std::string> allow = {"http://prom:9090/", "https://thanos.example/q", ""};
  for (const char* url : {"http://prom:9090", "http://prom:9090/", "http://prom:9090/x/y",
                          "https://thanos.example/q/r", "http://prom:9090.evil.example",
                          "http://prom:9090@evil.example/", "http://prom:90901", "http://prom",
                          "https://thanos.example/qq", "https://thanos.example", "", "/"}) {
    EXPECT_EQ(controller::reward_url_allowed(url, allow), prometheus_url_allowed(url, allow))
        << url;
  }
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
  tick();
  EXPECT_TRUE(prom_.queries().empty());
  Json j = *kube_.get(job_resource("RLJob", kNs), kJob);
  j["spec"]["rebalancing"]["enabled"] = true;
  j["status"]["phase"] = "Suspended";
  kube_.put(job_resource("RLJob", kNs), j);
  tick();
  EXPECT_TRUE(prom_.queries().empty());
}

// ---- Dedicated drafter pods ------------------------------------------------------------------

using Changes = std::vector<std::pair<int, int>>;  // (time, spec.roles.drafter.replicas)

TEST_F(RebalancerTest, Rebalance_DrafterStarves_AddsOnePodAWindowUpToMaxReplicas) {
  add_job({}, 3);  // roles.drafter: replicas 0, minReplicas 0, maxReplicas 2
  saturate(3);
  // No decision before the pods were seen for a window; then one pod at t=60 and one at t=120
  // (a window after the first); then the cap.
  EXPECT_EQ(run_until(300), (Changes{{60, 1}, {120, 2}}));
  Json rec = record();
  EXPECT_EQ(rec.value("replicas", -1), 2) << rec.dump();
  EXPECT_EQ(rec.value("added", -1), 2) << rec.dump();
  EXPECT_EQ(rec.value("action", ""), "add");
  EXPECT_EQ(rec.value("time", ""),
            controller::format_time(std::chrono::system_clock::from_time_t(1700000000 + 120)));
  std::vector<std::string> ev = events("DrafterPodAdded");
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_NE(ev[0].find("qwen-math-grpo-drafter-0"), std::string::npos) << ev[0];
  EXPECT_NE(ev[1].find("qwen-math-grpo-drafter-1"), std::string::npos) << ev[1];
  EXPECT_NE(ev[0].find("lowest 0.970"), std::string::npos) << ev[0];
  EXPECT_EQ(metric_line("tlt_operator_rebalancer_decisions_total{action=\"add_drafter\""),
            "tlt_operator_rebalancer_decisions_total{action=\"add_drafter\",job=\"" +
                std::string(kJob) + "\",namespace=\"research\"} 2");
  EXPECT_EQ(condition(kDrafterScaledCondition, "status"), "True");
  EXPECT_EQ(condition(kDrafterScaledCondition, "reason"), "MaxReplicasReached");
  EXPECT_EQ(count_logs("at maxReplicas"), 1) << "the cap is logged once, not every interval";
  EXPECT_EQ(count_logs("Added a dedicated drafter pod"), 2);
  EXPECT_TRUE(assigned().empty());
}

TEST_F(RebalancerTest, Rebalance_DrafterStarvesUnderKueue_NoPodBeyondTheAdmittedCount) {
  add_job({}, 3);  // roles.drafter: replicas 0, minReplicas 0, maxReplicas 2
  Json j = *kube_.get(job_resource("RLJob", kNs), kJob);
  j["metadata"]["labels"][controller::kQueueNameLabel] = "team";
  kube_.put(job_resource("RLJob", kNs), j);
  // Kueue admitted the Workload with one drafter pod (the job had asked for one).
  kube_.put(controller::workload_resource(kNs),
            {{"metadata",
              {{"name", controller::workload_name("RLJob", kJob)},
               {"namespace", kNs},
               {"labels", {{controller::kJobLabel, kJob}}},
               {"ownerReferences",
                {{{"apiVersion", "tlt.dev/v1alpha1"},
                  {"kind", "RLJob"},
                  {"name", kJob},
                  {"uid", uid_},
                  {"controller", true}}}}}},
             {"spec", {{"podSets", {{{"name", "drafter"}, {"count", 1}}}}}},
             {"status",
              {{"conditions", {{{"type", "Admitted"}, {"status", "True"}}}},
               {"admission",
                {{"clusterQueue", "cq"},
                 {"podSetAssignments", {{{"name", "drafter"}, {"count", 1}}}}}}}}});
  saturate(3);
  EXPECT_EQ(run_until(300), (Changes{{60, 1}})) << "the second pod would exceed the admission";
  std::vector<std::string> refused = events("DrafterQuotaExceeded");
  ASSERT_EQ(refused.size(), 1u) << "told once while it lasts";
  EXPECT_NE(refused[0].find("rljob-qwen-math-grpo was admitted with 1 drafter pods"),
            std::string::npos)
      << refused[0];
  EXPECT_EQ(condition(kDrafterScaledCondition, "reason"), "AdmittedQuotaReached");
}

TEST_F(RebalancerTest, Rebalance_DrafterStarves_NothingWhenTrainingOffOrBelowSaturation) {
  add_job({}, 3);
  patch_job({{"spec", {{"drafter", {{"training", {{"enabled", false}}}}}}}});
  saturate(3);
  EXPECT_TRUE(run_until(240).empty()) << "drafter training off: nothing to add";
  patch_job({{"spec", {{"drafter", {{"training", {{"enabled", true}}}}}}}});
  set_util(1, 1.0, 0.94);  // one pod dipped to 1 - idleBelow - 0.01 within the window
  EXPECT_TRUE(run_until(480).empty()) << "not every rollout pod was saturated";
  set_util(1, 1.0, 0.97);
  EXPECT_EQ(run_until(500), (Changes{{480, 1}}));
  EXPECT_EQ(condition(kDrafterScaledCondition, "reason"), "DrafterPodAdded");
}

TEST_F(RebalancerTest, Rebalance_AssignedPodReturned_DrafterPodAddedAWindowLater) {
  add_job({}, 3);
  saturate(3);
  patch_pod(2, {{"metadata", {{"annotations", {{kAssignmentAnnotation, kAssignedToDrafter}}}}}});
  // t=60: pod 2 goes back to rollout (capacity short) and no drafter pod is added, since a
  // pod trained the drafter in that window; a window later, still saturated: one is added.
  Changes c = run_until(75);
  EXPECT_TRUE(c.empty());
  EXPECT_EQ(assignment(2), "");
  EXPECT_EQ(run_until(180), (Changes{{120, 1}}));
}

TEST_F(RebalancerTest, Rebalance_RolloutIdleAgain_RemovesOnlyAddedPodsOneAWindow) {
  add_job({}, 3);
  edit_drafter_role({{"replicas", 1}, {"maxReplicas", 3}});  // the user's one pod
  saturate(3);
  EXPECT_EQ(run_until(135), (Changes{{60, 2}, {120, 3}}));
  // Pod 0 idle (assigned at once, t=135), the others comfortably busy (so it stays assigned):
  // the added pods go one a window.
  set_util(0, 0.0);
  set_util(1, 0.6);
  set_util(2, 0.6);
  EXPECT_EQ(run_until(600), (Changes{{180, 2}, {240, 1}})) << "never below the user's count";
  EXPECT_EQ(assigned(), std::vector<std::string>{pod(0)});
  std::vector<std::string> ev = events("DrafterPodRemoved");
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_NE(ev[0].find("qwen-math-grpo-drafter-2"), std::string::npos) << ev[0];
  EXPECT_NE(ev[0].find("is assigned to drafter training"), std::string::npos) << ev[0];
  EXPECT_EQ(metric_line("tlt_operator_rebalancer_decisions_total{action=\"remove_drafter\""),
            "tlt_operator_rebalancer_decisions_total{action=\"remove_drafter\",job=\"" +
                std::string(kJob) + "\",namespace=\"research\"} 2");
  EXPECT_EQ(record().value("added", -1), 0);
  EXPECT_EQ(condition(kDrafterScaledCondition, "status"), "False");
  EXPECT_EQ(condition(kDrafterScaledCondition, "reason"), "DrafterPodRemoved");
  EXPECT_EQ(count_logs("Removed a dedicated drafter pod"), 2);
}

TEST_F(RebalancerTest, Rebalance_IdlePodKeptByMinRollout_StillRemovesDrafterPods) {
  // An idle pod that minRolloutReplicas keeps in rollout is idle all the same.
  add_job({{"minRolloutReplicas", 2}}, 2);
  saturate(2);
  EXPECT_EQ(run_until(75), (Changes{{60, 1}}));
  set_util(1, 0.01);  // (the fake answers the whole window at once)
  EXPECT_EQ(run_until(300), (Changes{{120, 0}})) << "a window after the add";
  EXPECT_TRUE(assigned().empty());
}

TEST_F(RebalancerTest, Rebalance_MinReplicasRaised_RemovalStopsAtMinReplicas) {
  add_job({}, 3);
  saturate(3);
  EXPECT_EQ(run_until(135), (Changes{{60, 1}, {120, 2}}));
  edit_drafter_role({{"minReplicas", 1}});
  for (int i = 0; i < 3; ++i) set_util(i, 0.0);
  EXPECT_EQ(run_until(600), (Changes{{180, 1}})) << "minReplicas 1";
  EXPECT_EQ(record().value("added", -1), 0) << "the one left is kept by minReplicas";
  EXPECT_EQ(condition(kDrafterScaledCondition, "status"), "False");
}

TEST_F(RebalancerTest, Rebalance_DrafterSignalFlaps_AtMostOneChangePerWindow) {
  add_job({}, 3);
  edit_drafter_role({{"maxReplicas", 4}});
  // Saturated for 45 s, then pod 0 idle for 45 s, and so on (faster than a window).
  Changes all;
  for (int k = 0; elapsed() < 1200; ++k) {
    saturate(3);
    if ((k / 3) % 2) set_util(0, 0.0);
    for (auto c : run_until(elapsed() + 15)) all.push_back(c);
  }
  ASSERT_FALSE(all.empty());
  for (size_t i = 1; i < all.size(); ++i) {
    EXPECT_GE(all[i].first - all[i - 1].first, 60) << "two changes within one window";
  }
  for (auto [t, r] : all) {
    EXPECT_GE(r, 0);
    EXPECT_LE(r, 4);
  }
  EXPECT_LE(all.size(), 1200u / 60u);
  int ups = 0, downs = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    int before = i == 0 ? 0 : all[i - 1].second;
    (all[i].second > before ? ups : downs) += 1;
  }
  EXPECT_GE(ups, 1);
  EXPECT_GE(downs, 1) << "both signals were seen";
  std::string seen;
  for (auto [t, r] : all) seen += " " + std::to_string(t) + ":" + std::to_string(r);
  std::printf("drafter replicas over time:%s\n", seen.c_str());
}

TEST_F(RebalancerTest, Rebalance_OperatorRestart_RecordKeepsAddedPodsAndHolds) {
  add_job({}, 3);
  edit_drafter_role({{"maxReplicas", 3}});
  saturate(3);
  EXPECT_EQ(run_until(75), (Changes{{60, 1}}));
  // A new operator (nothing in memory) at t=75: no change for a window, then it carries on.
  Rebalancer restarted(&kube_, &cache_, &prom_, &clock_, &metrics_,
                       RebalancerOptions{"", "", {kUrl}});
  EXPECT_EQ(run_until(150, &restarted), (Changes{{135, 2}}));
  set_util(0, 0.0);
  set_util(1, 0.6);
  set_util(2, 0.6);
  // Pod 0 assigned at t=150; the restarted operator removes both pods the first one added too
  // (the record says 2 were added), one a window, and stops at the user's 0.
  EXPECT_EQ(run_until(600, &restarted), (Changes{{195, 1}, {255, 0}}));
  EXPECT_EQ(events("DrafterPodRemoved").size(), 2u);
}

TEST_F(RebalancerTest, Rebalance_UserEditsReplicas_AdoptedNotFought) {
  add_job({}, 3);
  edit_drafter_role({{"maxReplicas", 3}});
  saturate(3);
  EXPECT_EQ(run_until(75), (Changes{{60, 1}}));
  edit_drafter_role({{"replicas", 2}});  // kubectl edit at t=75
  for (int i = 0; i < 3; ++i) set_util(i, 0.0);
  // Adopted at t=75 (the user's count is now 2): idle rollout pods remove nothing, ever.
  EXPECT_TRUE(run_until(600).empty());
  EXPECT_EQ(drafter_replicas(), 2);
  Json rec = record();
  EXPECT_EQ(rec.value("replicas", -1), 2);
  EXPECT_EQ(rec.value("added", -1), 0);
  EXPECT_EQ(rec.value("action", ""), "adopt");
  EXPECT_EQ(events("DrafterReplicasAdopted").size(), 1u);
  EXPECT_EQ(condition(kDrafterScaledCondition, "reason"), "DrafterReplicasAdopted");
  // Lowered to 0 while the drafter starves: not put back within a window of the edit; then a
  // pod is added as for any starving job, one a window.
  saturate(3);
  for (int i = 0; i < 3; ++i) {  // return the assigned pods first
    patch_pod(i, {{"metadata", {{"annotations", {{kAssignmentAnnotation, nullptr}}}}}});
  }
  tick();  // t=600: sees the pods returned
  clock_.advance(seconds(15));
  edit_drafter_role({{"replicas", 0}});  // t=615
  Changes c = run_until(900);
  ASSERT_FALSE(c.empty());
  EXPECT_GE(c[0].first, 615 + 60) << "the user's edit was reverted within a window";
  EXPECT_EQ(events("DrafterReplicasAdopted").size(), 2u);
}

TEST_F(RebalancerTest, Rebalance_RecordUnreadable_PodsCountAsTheUsersWarnedOnce) {
  add_job({}, 3);
  edit_drafter_role({{"replicas", 1}});
  patch_job({{"metadata", {{"annotations", {{kDrafterScalingAnnotation, "{not json"}}}}}});
  for (int i = 0; i < 3; ++i) set_util(i, 0.0);
  EXPECT_TRUE(run_until(300).empty()) << "an unreadable record never removes a pod";
  EXPECT_EQ(count_logs("record on the job is unreadable"), 1);
}

TEST_F(RebalancerTest, Rebalance_DrafterPodAddedThenRemoved_ReconcilerCreatesAndDeletesIt) {
  add_job({}, 3);
  controller::Cache cache;
  controller::SyncEventRecorder recorder(&kube_, &clock_, "tlt-operator");
  controller::Reconciler reconciler(&kube_, &cache, &recorder, &clock_,
                                    controller::ReconcilerOptions{});
  auto reconcile = [&] {
    std::vector<kube::Resource> all = {job_resource("RLJob", "")};  // first: children need it
    for (const kube::Resource& r : controller::owned_resources("")) all.push_back(r);
    for (const kube::Resource& r : all) {
      kube::ListOptions lo;
      if (r.plural != "rljobs") lo.label_selector = controller::kJobLabel;
      StatusOr<kube::ObjectList> list = kube_.list(r, lo);
      ASSERT_TRUE(list.ok());
      cache.store(r.plural)->replace(list->items, list->resource_version);
    }
    controller::ReconcileResult res = reconciler.reconcile(controller::job_key("RLJob", kNs, kJob));
    EXPECT_TRUE(res.status.ok()) << res.status.to_string();
  };
  auto has_pod = [&](const std::string& name) { return kube_.get(pod_resource(kNs), name).ok(); };
  reconcile();
  EXPECT_FALSE(has_pod("qwen-math-grpo-drafter-0"));
  saturate(3);
  run_until(75);
  reconcile();
  EXPECT_TRUE(has_pod("qwen-math-grpo-drafter-0"));
  StatusOr<Json> cm = kube_.get(controller::configmap_resource(kNs), "qwen-math-grpo-rl-spec");
  ASSERT_TRUE(cm.ok());
  Json doc = Json::parse((*cm)["data"]["job.json"].get<std::string>());
  EXPECT_EQ(doc["spec"]["roles"]["drafter"]["replicas"], 1) << "the runtime reads it";
  set_util(0, 0.0);
  run_until(150);
  reconcile();
  StatusOr<Json> gone = kube_.get(pod_resource(kNs), "qwen-math-grpo-drafter-0");
  EXPECT_TRUE(!gone.ok() || (*gone)["metadata"].contains("deletionTimestamp"));
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
