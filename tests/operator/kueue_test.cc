// Kueue's job-framework contract (operator/controller/kueue.h) on the fake apiserver: the
// Workload a queued job gets, no pods until it is admitted, the admission's placement on the
// pods, eviction (pods deleted, then the admission cleared), pod sets that change, priority
// classes, PodsReady, Finished, deletion, the mirrored conditions, and jobs without the label.
// Also PodsPending (operator/controller/pods_pending.h), with or without Kueue.
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "api/encode.h"
#include "api/manifest.h"
#include "kube/fake_client.h"
#include "operator/controller/kueue.h"
#include "operator/controller/log.h"
#include "operator/controller/pods_pending.h"
#include "operator/controller/reconciler.h"

namespace tlt::controller {
namespace {

using Json = nlohmann::json;

constexpr const char* kNs = "default";
constexpr const char* kWorkload = "rljob-rljob-tiny";

// examples/rljob-tiny.yaml in namespace default, its roles asking for a CPU each; `queued`: in
// LocalQueue team-a.
Json tiny(bool queued) {
  std::ifstream in(std::string(TLT_SOURCE_DIR) + "/examples/rljob-tiny.yaml");
  std::stringstream s;
  s << in.rdbuf();
  StatusOr<api::Job> job = api::parse_job_yaml(s.str());
  EXPECT_TRUE(job.ok()) << job.status().to_string();
  Json j = std::visit([](const auto& x) { return api::to_json(x); }, job.value());
  j.erase("status");
  j["metadata"]["namespace"] = kNs;
  for (const char* role : {"rollout", "trainer"})
    j["spec"]["roles"][role]["resources"] = {{"requests", {{"cpu", "1"}}}};
  if (queued) j["metadata"]["labels"][kQueueNameLabel] = "team-a";
  return j;
}

Json condition(const std::string& type, bool is_true, const std::string& reason,
               const std::string& message = "m") {
  return {{"type", type},
          {"status", is_true ? "True" : "False"},
          {"reason", reason},
          {"message", message},
          {"lastTransitionTime", "2023-11-14T22:13:20Z"}};
}

class KueueTest : public ::testing::Test {
 protected:
  KueueTest()
      : clock_(std::chrono::system_clock::from_time_t(1700000000)),
        cache_(true),
        events_(&kube_, &clock_, "tlt-operator"),
        reconciler_(&kube_, &cache_, &events_, &clock_,
                    ReconcilerOptions{PodOptions{"registry.example/tlt:test", 29500, {}, {}, {}}, 4,
                                      true}) {
    set_log_sink([this](const std::string& line) { logs_.push_back(line); });
  }
  ~KueueTest() override { set_log_sink(nullptr); }

  std::string add(const Json& job) {
    kube_.put(job_resource("RLJob", kNs), job);
    return job_key("RLJob", kNs, job["metadata"]["name"]);
  }
  void sync() {
    std::vector<kube::Resource> all = {job_resource("RLJob", ""),
                                       job_resource("TSTPretrainJob", "")};
    for (const kube::Resource& r : owned_resources("")) all.push_back(r);
    all.push_back(workload_resource(""));
    for (const kube::Resource& r : all) {
      kube::ListOptions lo;
      if (r.group != api::kGroup) lo.label_selector = owned_selector();
      StatusOr<kube::ObjectList> list = kube_.list(r, lo);
      ASSERT_TRUE(list.ok()) << list.status().to_string();
      cache_.store(r.plural)->replace(list->items, list->resource_version);
    }
  }
  ReconcileResult reconcile(const std::string& key) {
    sync();
    ReconcileResult r = reconciler_.reconcile(key);
    EXPECT_TRUE(r.status.ok()) << r.status.to_string();
    return r;
  }
  Json job() {
    StatusOr<Json> j = kube_.get(job_resource("RLJob", kNs), "rljob-tiny");
    return j.ok() ? *j : Json();
  }
  StatusOr<Json> workload() { return kube_.get(workload_resource(kNs), kWorkload); }
  std::vector<Json> pods() { return kube_.objects(pod_resource(kNs)); }
  std::string job_condition(const std::string& type, const std::string& field) {
    for (const Json& c : job()["status"].value("conditions", Json::array())) {
      if (c["type"] == type) return c.value(field, "");
    }
    return "(none)";
  }
  int events(const std::string& reason) {
    int n = 0;
    for (const Json& e : kube_.objects(event_resource(kNs))) n += e["reason"] == reason;
    return n;
  }
  // Kueue's admission: quota reserved on flavour "gpu-a" for every pod set.
  void admit() {
    StatusOr<Json> w = workload();
    ASSERT_TRUE(w.ok());
    Json assignments = Json::array();
    for (const Json& ps : (*w)["spec"]["podSets"])
      assignments.push_back({{"name", ps["name"]},
                             {"flavors", {{"cpu", "gpu-a"}, {"memory", "gpu-a"}}},
                             {"count", ps["count"]}});
    (*w)["status"] = {{"conditions",
                       {condition("QuotaReserved", true, "QuotaReserved"),
                        condition("Admitted", true, "Admitted", "The workload is admitted")}},
                      {"admission", {{"clusterQueue", "cq"}, {"podSetAssignments", assignments}}}};
    kube_.put(workload_resource(kNs), *w);
  }
  void set_workload_conditions(const Json& conditions) {
    StatusOr<Json> w = workload();
    ASSERT_TRUE(w.ok());
    (*w)["status"]["conditions"] = conditions;
    kube_.put(workload_resource(kNs), *w);
  }
  void set_all_pods_running() {
    for (Json p : pods()) {
      p["status"] = {{"phase", "Running"},
                     {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}};
      kube_.put(pod_resource(kNs), p);
    }
  }

  kube::FakeKubeClient kube_;
  FakeClock clock_;
  Cache cache_;
  SyncEventRecorder events_;
  Reconciler reconciler_;
  std::vector<std::string> logs_;
};

TEST_F(KueueTest, QueuedJob_GetsOneWorkload_AndNoPods) {
  std::string key = add(tiny(true));
  ReconcileResult r = reconcile(key);
  EXPECT_EQ(r.phase, "Queued");
  EXPECT_TRUE(pods().empty());
  StatusOr<Json> w = workload();
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_EQ((*w)["apiVersion"], "kueue.x-k8s.io/v1beta2");
  EXPECT_EQ((*w)["spec"]["queueName"], "team-a");
  const Json& owner = (*w)["metadata"]["ownerReferences"][0];
  EXPECT_EQ(owner["kind"], "RLJob");
  EXPECT_EQ(owner["uid"], job()["metadata"]["uid"]);
  EXPECT_EQ(owner["controller"], true);
  const Json& sets = (*w)["spec"]["podSets"];
  ASSERT_EQ(sets.size(), 3u);
  std::map<std::string, int> counts;
  for (const Json& ps : sets) counts[ps["name"]] = ps["count"];
  EXPECT_EQ(counts["rollout"], 2);
  EXPECT_EQ(counts["trainer"], 1);
  EXPECT_EQ(counts["drafter"], 0) << "the drafter pod set is kept at count 0";
  for (const Json& ps : sets) {
    const Json& c = ps["template"]["spec"]["containers"][0];
    EXPECT_EQ(c["name"], "tlt");
    if (ps["name"] != "drafter") {  // (the example gives the drafter no resources)
      EXPECT_EQ(c["resources"]["requests"]["cpu"], "1") << ps.dump();
    }
    EXPECT_FALSE(c.contains("env")) << "only what Kueue reads";
  }
  EXPECT_FALSE((*w)["spec"].contains("priorityClassRef"));
  EXPECT_EQ(job()["status"]["phase"], "Queued");
  EXPECT_EQ(job_condition("Running", "reason"), "Queued");
  EXPECT_NE(job_condition("Running", "message").find(kWorkload), std::string::npos);
  // No pods yet: Created does not say they were made.
  EXPECT_EQ(job_condition("Created", "status"), "False");
  EXPECT_EQ(job_condition("Created", "reason"), "PodsQueued");
  EXPECT_EQ(job_condition("Created", "message").find("pods were created"), std::string::npos)
      << job_condition("Created", "message");
  EXPECT_NE(job_condition("Created", "message").find("when Kueue admits"), std::string::npos)
      << job_condition("Created", "message");
  EXPECT_EQ(job_condition("QuotaReserved", "status"), "False");
  EXPECT_EQ(job_condition("Admitted", "status"), "False");
  EXPECT_EQ(job_condition("Evicted", "status"), "False");
  EXPECT_EQ(events("WorkloadCreated"), 1);

  r = reconcile(key);  // nothing more while Kueue has not admitted it
  EXPECT_EQ(r.phase, "Queued");
  EXPECT_EQ(kube_.calls("create", "workloads"), 1);
  EXPECT_TRUE(pods().empty());
}

TEST_F(KueueTest, JobWithoutQueueLabel_RunsAsWithoutKueue) {
  std::string key = add(tiny(false));
  ReconcileResult r = reconcile(key);
  EXPECT_EQ(r.phase, "Pending");
  EXPECT_EQ(pods().size(), 3u);
  EXPECT_FALSE(workload().ok());
  EXPECT_EQ(job_condition("QuotaReserved", "status"), "(none)");
}

TEST_F(KueueTest, QueueLabelRemoved_WorkloadDeleted_JobRuns) {
  std::string key = add(tiny(true));
  reconcile(key);
  ASSERT_TRUE(workload().ok());
  Json j = job();
  j["metadata"]["labels"].erase(kQueueNameLabel);
  kube_.put(job_resource("RLJob", kNs), j);
  ReconcileResult r = reconcile(key);
  EXPECT_FALSE(workload().ok()) << "its quota is not held for a job that left the queue";
  EXPECT_EQ(r.phase, "Pending");
  EXPECT_EQ(pods().size(), 3u);
  EXPECT_EQ(events("WorkloadDeleted"), 1);
}

TEST_F(KueueTest, MissingLocalQueue_JobQueuedWithKueuesReason) {
  std::string key = add(tiny(true));
  reconcile(key);
  set_workload_conditions(Json::array(
      {condition("QuotaReserved", false, "Inadmissible", "LocalQueue team-a doesn't exist")}));
  ReconcileResult r = reconcile(key);
  EXPECT_EQ(r.phase, "Queued");
  EXPECT_TRUE(pods().empty());
  EXPECT_EQ(job_condition("QuotaReserved", "reason"), "Inadmissible");
  EXPECT_EQ(job_condition("QuotaReserved", "message"), "LocalQueue team-a doesn't exist");
  EXPECT_NE(job_condition("Running", "message").find("LocalQueue team-a doesn't exist"),
            std::string::npos)
      << job_condition("Running", "message");
}

TEST_F(KueueTest, Admitted_PodsCreatedWithTheFlavoursPlacement) {
  kube_.put(
      resource_flavor_resource(),
      {{"apiVersion", "kueue.x-k8s.io/v1beta2"},
       {"kind", "ResourceFlavor"},
       {"metadata", {{"name", "gpu-a"}}},
       {"spec",
        {{"nodeLabels", {{"pool", "a100"}}},
         {"tolerations", {{{"key", "gpu"}, {"operator", "Exists"}, {"effect", "NoSchedule"}}}}}}});
  std::string key = add(tiny(true));
  reconcile(key);
  admit();
  ReconcileResult r = reconcile(key);
  EXPECT_EQ(r.phase, "Pending");
  ASSERT_EQ(pods().size(), 3u);
  for (const Json& p : pods()) {
    EXPECT_EQ(p["spec"]["nodeSelector"]["pool"], "a100") << p["metadata"]["name"];
    bool tolerated = false;
    for (const Json& t : p["spec"]["tolerations"]) tolerated = tolerated || t["key"] == "gpu";
    EXPECT_TRUE(tolerated) << p["spec"].dump();
  }
  EXPECT_EQ(job_condition("Admitted", "status"), "True");
  EXPECT_EQ(job_condition("QuotaReserved", "status"), "True");
  EXPECT_EQ(events("Admitted"), 1);
  EXPECT_EQ(events("QuotaReserved"), 1);

  // PodsReady for Kueue's waitForPodsReady: False (WaitForStart), then True.
  StatusOr<Json> w = workload();
  ASSERT_TRUE(w.ok());
  Json ready = find_condition((*w)["status"]["conditions"], "PodsReady");
  ASSERT_TRUE(ready.is_object()) << (*w)["status"].dump();
  EXPECT_EQ(ready["status"], "False");
  EXPECT_EQ(ready["reason"], "WaitForStart");
  set_all_pods_running();
  r = reconcile(key);
  EXPECT_EQ(r.phase, "Running");
  w = workload();
  ready = find_condition((*w)["status"]["conditions"], "PodsReady");
  EXPECT_EQ(ready["status"], "True");
}

TEST_F(KueueTest, Admitted_MissingFlavour_IsAnErrorNotPods) {
  std::string key = add(tiny(true));
  reconcile(key);
  admit();
  sync();
  ReconcileResult r = reconciler_.reconcile(key);
  EXPECT_FALSE(r.status.ok());
  EXPECT_NE(r.status.message().find("ResourceFlavor gpu-a"), std::string::npos)
      << r.status.message();
  EXPECT_TRUE(pods().empty());
}

TEST_F(KueueTest, Evicted_PodsDeletedThenAdmissionCleared_ThenResumes) {
  kube_.put(resource_flavor_resource(),
            {{"metadata", {{"name", "gpu-a"}}}, {"spec", Json::object()}});
  std::string key = add(tiny(true));
  reconcile(key);
  admit();
  reconcile(key);
  ASSERT_EQ(pods().size(), 3u);
  EXPECT_EQ(job_condition("Created", "reason"), "ObjectsCreated");
  StatusOr<Json> w = workload();
  Json conditions = (*w)["status"]["conditions"];
  conditions.push_back(condition("Evicted", true, "Preempted",
                                 "Preempted to accommodate a "
                                 "higher priority Workload"));
  set_workload_conditions(conditions);

  ReconcileResult r = reconcile(key);
  EXPECT_EQ(r.phase, "Queued");
  EXPECT_TRUE(pods().empty()) << "the pods are deleted (SIGTERM: the trainer checkpoints)";
  EXPECT_EQ(job_condition("Running", "reason"), "Evicted");
  EXPECT_EQ(job_condition("Created", "status"), "False") << "the pods were deleted";
  EXPECT_EQ(job_condition("Created", "reason"), "PodsQueued");
  EXPECT_EQ(job_condition("Evicted", "status"), "True");
  EXPECT_EQ(job_condition("Evicted", "reason"), "Preempted");
  EXPECT_EQ(events("Evicted"), 2) << "the job's Evicted Event and the pods' deletion";

  r = reconcile(key);  // the pods are gone: the admission is cleared
  EXPECT_EQ(r.phase, "Queued");
  w = workload();
  ASSERT_TRUE(w.ok());
  EXPECT_FALSE((*w)["status"].contains("admission")) << (*w)["status"].dump();
  Json quota = find_condition((*w)["status"]["conditions"], "QuotaReserved");
  EXPECT_EQ(quota["status"], "False");
  EXPECT_EQ(quota["reason"], "Pending");
  EXPECT_EQ(find_condition((*w)["status"]["conditions"], "Admitted")["status"], "False");
  EXPECT_EQ(find_condition((*w)["status"]["conditions"], "Requeued")["status"], "True");

  // Kueue admits it again (the Evicted condition turned False): the pods come back.
  admit();
  r = reconcile(key);
  EXPECT_EQ(pods().size(), 3u);
  EXPECT_EQ(job_condition("Evicted", "status"), "False");
  EXPECT_EQ(job_condition("Created", "status"), "True");
  EXPECT_EQ(job_condition("Created", "reason"), "ObjectsCreated");
}

TEST_F(KueueTest, PodSetsChange_NotAdmittedReplaced_AdmittedKeptWhenWithin) {
  kube_.put(resource_flavor_resource(),
            {{"metadata", {{"name", "gpu-a"}}}, {"spec", Json::object()}});
  std::string key = add(tiny(true));
  reconcile(key);
  Json j = job();
  j["spec"]["roles"]["rollout"]["replicas"] = 3;
  kube_.put(job_resource("RLJob", kNs), j);
  ReconcileResult r = reconcile(key);
  EXPECT_EQ(r.phase, "Queued");
  EXPECT_FALSE(workload().ok()) << "a Workload not admitted is replaced";
  EXPECT_EQ(job_condition("Running", "reason"), "WorkloadReplaced");
  reconcile(key);
  StatusOr<Json> w = workload();
  ASSERT_TRUE(w.ok());
  for (const Json& ps : (*w)["spec"]["podSets"]) {
    if (ps["name"] == "rollout") {
      EXPECT_EQ(ps["count"], 3);
    }
  }

  admit();
  reconcile(key);
  ASSERT_EQ(pods().size(), 4u);
  j = job();
  j["spec"]["roles"]["rollout"]["replicas"] = 2;  // within the admitted 3
  kube_.put(job_resource("RLJob", kNs), j);
  r = reconcile(key);
  EXPECT_TRUE(workload().ok()) << "fewer pods than admitted keep the admission";
  EXPECT_NE(r.phase, "Queued");

  j = job();
  j["spec"]["roles"]["rollout"]["replicas"] = 5;  // above the admitted 3
  kube_.put(job_resource("RLJob", kNs), j);
  r = reconcile(key);
  EXPECT_EQ(r.phase, "Queued");
  EXPECT_FALSE(workload().ok()) << "more pods than admitted: queued again at the new size";
  EXPECT_TRUE(pods().empty());
}

TEST_F(KueueTest, WorkloadPriorityClass_CarriedWithItsValue_MissingOneHolds) {
  Json j = tiny(true);
  j["metadata"]["labels"][kWorkloadPriorityLabel] = "urgent";
  std::string key = add(j);
  ReconcileResult r = reconcile(key);
  EXPECT_EQ(r.phase, "Queued");
  EXPECT_FALSE(workload().ok());
  EXPECT_EQ(job_condition("Running", "reason"), "PriorityClassNotFound");
  EXPECT_NE(job_condition("Running", "message").find("WorkloadPriorityClass urgent"),
            std::string::npos);

  kube_.put(workload_priority_class_resource(),
            {{"metadata", {{"name", "urgent"}}}, {"value", 1000}});
  reconcile(key);
  StatusOr<Json> w = workload();
  ASSERT_TRUE(w.ok());
  EXPECT_EQ((*w)["spec"]["priority"], 1000);
  EXPECT_EQ((*w)["spec"]["priorityClassRef"]["kind"], "WorkloadPriorityClass");
  EXPECT_EQ((*w)["spec"]["priorityClassRef"]["name"], "urgent");
}

TEST_F(KueueTest, FinishedJob_WorkloadFinished_DeletedJob_WorkloadDeleted) {
  kube_.put(resource_flavor_resource(),
            {{"metadata", {{"name", "gpu-a"}}}, {"spec", Json::object()}});
  std::string key = add(tiny(true));
  reconcile(key);
  admit();
  reconcile(key);
  for (Json p : pods()) {
    p["status"] = {{"phase", "Succeeded"}};
    kube_.put(pod_resource(kNs), p);
  }
  ReconcileResult r = reconcile(key);
  EXPECT_EQ(r.phase, "Succeeded");
  reconcile(key);
  StatusOr<Json> w = workload();
  ASSERT_TRUE(w.ok());
  Json finished = find_condition((*w)["status"]["conditions"], "Finished");
  EXPECT_EQ(finished["status"], "True") << (*w)["status"].dump();
  EXPECT_EQ(finished["reason"], "Succeeded");

  ASSERT_TRUE(kube_.remove(job_resource("RLJob", kNs), "rljob-tiny").ok());
  reconcile(key);
  EXPECT_FALSE(workload().ok()) << "deleted with the job (no garbage collector assumed)";
}

TEST_F(KueueTest, ForeignWorkloadOfTheName_Blocked) {
  kube_.put(workload_resource(kNs),
            {{"metadata", {{"name", kWorkload}, {"namespace", kNs}, {"labels", {{"x", "y"}}}}},
             {"spec", {{"podSets", Json::array()}}}});
  std::string key = add(tiny(true));
  sync();
  ReconcileResult r = reconciler_.reconcile(key);
  EXPECT_FALSE(r.status.ok());
  EXPECT_EQ(r.phase, "Blocked");
  EXPECT_TRUE(pods().empty());
}

TEST(KueueParts, AddFlavor_ConflictingNodeLabels_NamesTheLabel) {
  Placement p;
  ASSERT_TRUE(
      add_flavor({{"metadata", {{"name", "a"}}}, {"spec", {{"nodeLabels", {{"pool", "x"}}}}}}, &p)
          .ok());
  Status s =
      add_flavor({{"metadata", {{"name", "b"}}}, {"spec", {{"nodeLabels", {{"pool", "y"}}}}}}, &p);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("pool"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("ResourceFlavor b"), std::string::npos) << s.message();
}

TEST(KueueParts, ComparePodSets_IgnoresWhatTheApiserverAdds) {
  Json want = {
      {{"name", "trainer"},
       {"count", 1},
       {"template",
        {{"spec",
          {{"containers", {{{"name", "tlt"}, {"resources", {{"requests", {{"cpu", "1"}}}}}}}}}}}}}};
  WorkloadView have;
  have.pod_sets = want;
  have.pod_sets[0]["template"]["metadata"] = Json::object();  // defaulted by the apiserver
  have.pod_sets[0]["minCount"] = nullptr;
  EXPECT_EQ(compare_pod_sets(want, have), PodSetFit::kSame);
  want[0]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2";
  EXPECT_EQ(compare_pod_sets(want, have), PodSetFit::kDifferent);
  want[0]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1";
  want[0]["count"] = 0;
  EXPECT_EQ(compare_pod_sets(want, have), PodSetFit::kDifferent) << "not admitted";
  have.admitted = true;
  have.admitted_counts["trainer"] = 1;
  EXPECT_EQ(compare_pod_sets(want, have), PodSetFit::kWithin);
}

TEST_F(KueueTest, PodPendingPastTheTimeout_PodsPendingNamesItAndTheSchedulersReason) {
  std::string key = add(tiny(false));
  ReconcileResult r = reconcile(key);
  ASSERT_EQ(pods().size(), 3u);
  for (Json p : pods()) {
    p["metadata"]["creationTimestamp"] = format_time(clock_.now());
    p["status"] = {{"phase", "Pending"}};
    if (p["metadata"]["name"] == "rljob-tiny-trainer-0") {
      p["status"]["conditions"] = {{{"type", "PodScheduled"},
                                    {"status", "False"},
                                    {"reason", "Unschedulable"},
                                    {"message", "0/4 nodes are available: 4 Insufficient cpu."}}};
    } else {
      p["status"] = {{"phase", "Running"},
                     {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}};
    }
    kube_.put(pod_resource(kNs), p);
  }
  r = reconcile(key);
  EXPECT_EQ(job_condition("PodsPending", "status"), "(none)") << "not past the timeout yet";
  ASSERT_TRUE(r.requeue_after.has_value()) << "looked at again when the timeout passes";
  EXPECT_EQ(r.requeue_after->count(), 301);

  clock_.advance(std::chrono::seconds(301));
  r = reconcile(key);
  EXPECT_EQ(job_condition("PodsPending", "status"), "True");
  EXPECT_EQ(job_condition("PodsPending", "reason"), "Unschedulable");
  std::string message = job_condition("PodsPending", "message");
  EXPECT_NE(message.find("rljob-tiny-trainer-0 (Unschedulable: 0/4 nodes are available"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find("rollout"), std::string::npos) << "running pods are not named";
  EXPECT_EQ(events("PodsPending"), 1);
  EXPECT_EQ(pods().size(), 3u) << "the pods are kept";
  reconcile(key);
  EXPECT_EQ(events("PodsPending"), 1) << "told once";

  Json p = *kube_.get(pod_resource(kNs), "rljob-tiny-trainer-0");
  p["status"] = {{"phase", "Running"}, {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}};
  kube_.put(pod_resource(kNs), p);
  r = reconcile(key);
  EXPECT_EQ(r.phase, "Running");
  EXPECT_EQ(job_condition("PodsPending", "status"), "False");
  EXPECT_EQ(job_condition("PodsPending", "reason"), "NoPodsPending");
}

TEST(PodsPending, NeverPendingLong_NoCondition) {
  WallTime now = std::chrono::system_clock::from_time_t(1700000000);
  PendingReport r = pods_pending({{"a", "Pending", now - std::chrono::seconds(10), "", ""},
                                  {"b", "Running", now - std::chrono::seconds(1000), "", ""}},
                                 now, std::chrono::seconds(300), Json::object(), 1);
  EXPECT_TRUE(r.condition.is_null());
  ASSERT_TRUE(r.recheck_after.has_value());
  EXPECT_EQ(r.recheck_after->count(), 291);
}

TEST(PodsPending, ManyPods_FiveNamedTheRestCounted) {
  WallTime now = std::chrono::system_clock::from_time_t(1700000000);
  std::vector<PendingPod> pods;
  for (int i = 0; i < 7; ++i)
    pods.push_back({"p" + std::to_string(i), "Pending", now - std::chrono::seconds(400), "", ""});
  PendingReport r = pods_pending(pods, now, std::chrono::seconds(300), Json::object(), 1);
  ASSERT_TRUE(r.condition.is_object());
  EXPECT_EQ(r.condition["reason"], "PodsNotStarted") << "scheduled, not started";
  std::string m = r.condition["message"];
  EXPECT_NE(m.find("7 pods Pending"), std::string::npos) << m;
  EXPECT_NE(m.find("p4 (scheduled, not started); and 2 more"), std::string::npos) << m;
  EXPECT_TRUE(r.turned_true);
}

}  // namespace
}  // namespace tlt::controller
