// The reconciler against the fake apiserver (reconciler_fixture.h) when things go wrong: invalid
// specs and refused templates, a pass that throws, deletion through the finalizer, apiserver
// errors, objects of the job's names that are not its own, a stale cache that neither creates
// twice nor counts a failure twice, and that status is patched only when it changes.

#include "tests/operator/reconciler_fixture.h"

namespace tlt::controller {
namespace {

using namespace test;

TEST_F(ReconcilerTest, Reconcile_InvalidSpec_FailedNamingFieldNoPods) {
  Json rl = example("rljob-cluster.yaml");
  rl["spec"]["algorithm"]["groupSize"] = 1;
  std::string key = add(rl);
  ReconcileResult r = reconcile_synced(key);
  EXPECT_TRUE(r.status.ok()) << "no retry: retrying cannot fix a spec";
  EXPECT_FALSE(r.requeue_after.has_value());
  EXPECT_EQ(r.phase, "Failed");
  Json j = job(key);
  EXPECT_EQ(j["status"]["phase"], "Failed");
  EXPECT_EQ(condition(j, "Failed", "reason"), "InvalidSpec");
  EXPECT_NE(condition(j, "Failed", "message").find("spec.algorithm.groupSize"), std::string::npos)
      << condition(j, "Failed", "message");
  EXPECT_EQ(kube_.calls("apply"), 0) << "no pods, Service or ConfigMap";
  // Fixed: the job runs.
  edit(key, {{"algorithm", {{"groupSize", 8}}}});
  r = reconcile(key);
  EXPECT_EQ(r.phase, "Pending");
  EXPECT_EQ(pod_names("research").size(), 9u);
}

TEST_F(ReconcilerTest, Reconcile_PodPolicyRefusesTemplate_FailedNamingFieldEventNoPods) {
  Json rl = example("rljob-cluster.yaml");
  rl["spec"]["roles"]["trainer"]["podTemplate"] = {
      {"spec",
       {{"hostNetwork", true}, {"volumes", {{{"name", "root"}, {"hostPath", {{"path", "/"}}}}}}}}};
  std::string key = add(rl);
  ReconcileResult r = reconcile_synced(key);
  EXPECT_TRUE(r.status.ok()) << "no retry: the spec or the policy must change";
  EXPECT_FALSE(r.requeue_after.has_value());
  EXPECT_EQ(r.phase, "Failed");
  Json j = job(key);
  EXPECT_EQ(condition(j, "Failed", "reason"), "ForbiddenByPodPolicy");
  std::string message = condition(j, "Failed", "message");
  for (const char* needle :
       {"spec.roles.trainer.podTemplate.spec.hostNetwork", "control \"Host Namespaces\"",
        "spec.roles.trainer.podTemplate.spec.volumes[0].hostPath", "control \"Volume Types\""}) {
    EXPECT_NE(message.find(needle), std::string::npos) << message;
  }
  EXPECT_TRUE(pod_names("research").empty());
  EXPECT_EQ(kube_.calls("apply"), 0) << "no pods, Service or ConfigMap";
  EXPECT_EQ(kube_.calls("create", "pods") + kube_.calls("create", "services"), 0);
  EXPECT_EQ(events_with_reason("research", "ForbiddenByPodPolicy"), 1);
  reconcile(key);
  EXPECT_EQ(events_with_reason("research", "ForbiddenByPodPolicy"), 1) << "once, not per pass";
  // The admin's level allows both: the same job runs.
  ReconcilerOptions allowing{PodOptions{"registry.example/tlt:test", 29500, {}, {}, {}}, 4};
  allowing.pod.policy.level = PodSecurityLevel::kPrivileged;
  Reconciler lenient(&kube_, &cache_, &events_, &clock_, allowing);
  sync();
  r = lenient.reconcile(key);
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(r.phase, "Pending");
  EXPECT_EQ(pod_names("research").size(), 9u);
}

// Pods of `job` in `ns` (names start "<job>-").
std::vector<std::string> pods_of(const std::vector<std::string>& names, const std::string& job) {
  std::vector<std::string> out;
  for (const std::string& n : names) {
    if (n.rfind(job + "-", 0) == 0) out.push_back(n);
  }
  return out;
}

TEST_F(ReconcilerTest, Reconcile_TemplateFieldOfWrongType_FailedNamingFieldNoPods) {
  const std::string at = "spec.roles.rollout.podTemplate";
  // Each template (rollout's podTemplate) and the line the Failed condition must hold.
  const std::vector<std::pair<const char*, std::string>> cases = {
      {R"({"spec": {"volumes": [{"name": false, "emptyDir": {}}]}})",
       at + ".spec.volumes[0].name: must be a string (got false)"},
      {R"({"spec": {"containers": [{"name": 1}]}})",
       at + ".spec.containers[0].name: must be a string (got 1)"},
      {R"({"spec": {"containers": "x"}})",
       at + ".spec.containers: must be a list of objects (got \"x\")"},
      {R"({"spec": {"containers": [{"name": "tlt", "env": [{"name": "A", "value": 1}]}]}})",
       at + ".spec.containers[0].env[0].value: must be a string (got 1)"},
      {R"({"metadata": []})", at + ".metadata: must be an object (got a list)"},
      {R"({"metadata": {"labels": {"team": 7}}})",
       at + ".metadata.labels.team: must be a string (got 7)"},
      {R"({"spec": []})", at + ".spec: must be an object (got a list)"},
      {R"({"spec": {"hostNetwork": "true"}})",
       at + ".spec.hostNetwork: must be a boolean (got \"true\")"},
      {R"({"spec": {"containers": [{"name": "tlt", "volumeMounts": [{"name": false}]}]}})",
       at + ".spec.containers[0].volumeMounts[0].name: must be a string (got false)"},
      {R"({"spec": {"initContainers": [{"name": "i", "securityContext": {"privileged": "yes"}}]}})",
       at + ".spec.initContainers[0].securityContext.privileged: must be a boolean (got \"yes\")"},
  };
  std::vector<std::string> keys;
  for (size_t i = 0; i < cases.size(); ++i) {
    Json rl = example("rljob-cluster.yaml");
    rl["metadata"]["name"] = "bad-" + std::to_string(i);
    rl["spec"]["roles"]["rollout"]["podTemplate"] = Json::parse(cases[i].first);
    keys.push_back(add(rl));
  }
  std::string good = add(example("rljob-cluster.yaml"));
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].first);
    ReconcileResult r = reconcile_synced(keys[i]);
    EXPECT_TRUE(r.status.ok()) << r.status.to_string();
    EXPECT_FALSE(r.requeue_after.has_value());
    EXPECT_EQ(r.phase, "Failed");
    Json j = job(keys[i]);
    EXPECT_EQ(condition(j, "Failed", "reason"), "InvalidSpec");
    std::string message = condition(j, "Failed", "message");
    EXPECT_NE(message.find(cases[i].second), std::string::npos) << message;
    EXPECT_TRUE(pods_of(pod_names("research"), "bad-" + std::to_string(i)).empty());
  }
  EXPECT_EQ(events_with_reason("research", "InvalidSpec"), static_cast<int>(cases.size()));
  EXPECT_EQ(kube_.calls("create", "pods"), 0);
  // The good job in the same reconciler still gets its pods.
  ReconcileResult r = reconcile(good);
  EXPECT_EQ(r.phase, "Pending");
  EXPECT_EQ(pods_of(pod_names("research"), "qwen-math-grpo").size(), 9u);
}

TEST_F(ReconcilerTest, Reconcile_PassThrows_JobFailedNamingItOtherJobsGoOn) {
  Json bad = example("rljob-cluster.yaml");
  bad["metadata"]["name"] = "bad";
  std::string bad_key = add(bad), good = add(example("rljob-cluster.yaml"));
  // A defect reached by one job's pods: creating them throws, on the reconciler's worker threads.
  kube_.on_create = [](const kube::Resource& r, const Json& object) {
    if (r.plural == "pods" && object["metadata"]["name"].get<std::string>().rfind("bad-", 0) == 0)
      (void)Json(false).get<std::string>();  // nlohmann type_error 302
  };
  ReconcileResult r = reconcile_synced(bad_key);
  EXPECT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(r.phase, "Failed");
  Json j = job(bad_key);
  EXPECT_EQ(condition(j, "Failed", "reason"), "ReconcileError");
  std::string message = condition(j, "Failed", "message");
  EXPECT_NE(message.find("RLJob research/bad"), std::string::npos) << message;
  EXPECT_NE(message.find("type must be string"), std::string::npos) << message;
  EXPECT_EQ(events_with_reason("research", "ReconcileError"), 1);
  EXPECT_EQ(count_logs("Reconciling a job threw"), 1);
  r = reconcile(good);
  EXPECT_EQ(r.phase, "Pending");
  EXPECT_EQ(pods_of(pod_names("research"), "qwen-math-grpo").size(), 9u);
  // Looked at again on the next pass: the same failure is not told twice; once the defect is
  // gone the job runs.
  reconcile(bad_key);
  EXPECT_EQ(events_with_reason("research", "ReconcileError"), 1);
  kube_.on_create = nullptr;
  r = reconcile(bad_key);
  EXPECT_EQ(r.phase, "Pending");
  EXPECT_EQ(pods_of(pod_names("research"), "bad").size(), 9u);
}

TEST_F(ReconcilerTest, Reconcile_JobDeleted_FinalizerLeavesNothing) {
  std::string key = add(example("rljob-cluster.yaml"));
  reconcile(key);
  ASSERT_TRUE(kube_.remove(job_resource("RLJob", "research"), "qwen-math-grpo").ok());
  ASSERT_FALSE(job(key).is_null()) << "held by the finalizer";
  reconcile(key);
  EXPECT_TRUE(job(key).is_null());
  EXPECT_TRUE(pod_names("research").empty());
  EXPECT_TRUE(kube_.objects(service_resource("research")).empty());
  EXPECT_TRUE(kube_.objects(configmap_resource("research")).empty());
  EXPECT_TRUE(kube_.objects(serviceaccount_resource("research")).empty());
  EXPECT_TRUE(kube_.objects(role_resource("research")).empty());
  EXPECT_TRUE(kube_.objects(rolebinding_resource("research")).empty());
  ReconcileResult r = reconcile(key);  // gone: nothing to do
  EXPECT_EQ(r.phase, "");
}

TEST_F(ReconcilerTest, Reconcile_ApiserverError_ReturnedForBackoffNoStatus) {
  std::string key = add(example("tst-cluster.yaml"));
  kube_.fail_next("create", Status::Unavailable("connection refused"));
  ReconcileResult r = reconcile_synced(key);
  EXPECT_EQ(r.status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(kube_.calls("patch_status"), 0);
  reconcile(key);
  EXPECT_EQ(pod_names("research").size(), 16u);
}

TEST_F(ReconcilerTest, Reconcile_StaleResourceVersion_FinalizerPatchAborted) {
  std::string key = add(example("tst-cluster.yaml"));
  kube_.fail_next("patch", Status::Aborted("the object has been modified"));
  EXPECT_EQ(reconcile_synced(key).status.code(), StatusCode::kAborted);
  EXPECT_EQ(kube_.calls("create"), 0) << "nothing created before the finalizer is in place";
}

TEST_F(ReconcilerTest, Reconcile_ForeignServiceOfTheName_NotAdoptedJobBlocked) {
  kube_.put(service_resource("research"),
            {{"apiVersion", "v1"},
             {"kind", "Service"},
             {"metadata", {{"name", "tst-small-kjv-tst"}, {"namespace", "research"}}},
             {"spec", {{"clusterIP", "10.0.0.7"}}}});
  std::string key = add(example("tst-cluster.yaml"));
  ReconcileResult r = reconcile_synced(key);
  EXPECT_EQ(r.status.code(), StatusCode::kAlreadyExists) << "retried with backoff";
  EXPECT_EQ(r.phase, "Blocked");
  EXPECT_TRUE(pod_names("research").empty()) << "no pods without their Service";
  StatusOr<Json> svc = kube_.get(service_resource("research"), "tst-small-kjv-tst");
  ASSERT_TRUE(svc.ok());
  EXPECT_EQ((*svc)["spec"]["clusterIP"], "10.0.0.7") << "not ours: untouched";
  EXPECT_FALSE((*svc)["metadata"].contains("ownerReferences")) << "not adopted";
  Json j = job(key);
  EXPECT_EQ(j["status"]["phase"], "Blocked");
  EXPECT_EQ(condition(j, "Created", "status"), "False");
  EXPECT_EQ(condition(j, "Created", "reason"), "AlreadyExists");
  EXPECT_NE(condition(j, "Created", "message").find("Service tst-small-kjv-tst already exists"),
            std::string::npos)
      << condition(j, "Created", "message");
  EXPECT_EQ(events_with_reason("research", "AlreadyExists"), 1);
  reconcile_synced(key);
  EXPECT_EQ(events_with_reason("research", "AlreadyExists"), 1) << "one Event, not one a retry";
  // The foreign Service goes: the job proceeds.
  ASSERT_TRUE(kube_.remove(service_resource("research"), "tst-small-kjv-tst").ok());
  r = reconcile(key);
  EXPECT_EQ(r.phase, "Pending");
  EXPECT_EQ(pod_names("research").size(), 16u);
  EXPECT_EQ(condition(job(key), "Created", "status"), "True");
}

TEST_F(ReconcilerTest, Reconcile_ForeignPodOrConfigMapOfTheName_NeverOverwritten) {
  Json foreign_pod = {{"apiVersion", "v1"},
                      {"kind", "Pod"},
                      {"metadata",
                       {{"name", "tst-small-kjv-workers-3"},
                        {"namespace", "research"},
                        {"labels", {{"tlt.dev/job", "tst-small-kjv"}}}}},
                      {"spec", {{"containers", {{{"name", "x"}, {"image", "mine:1"}}}}}}};
  kube_.put(pod_resource("research"), foreign_pod);
  std::string key = add(example("tst-cluster.yaml"));
  ReconcileResult r = reconcile_synced(key);
  EXPECT_EQ(r.status.code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(r.phase, "Blocked");
  EXPECT_EQ(pod_names("research").size(), 16u) << "15 created, the foreign one kept";
  StatusOr<Json> p = kube_.get(pod_resource("research"), "tst-small-kjv-workers-3");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)["spec"]["containers"][0]["image"], "mine:1");
  EXPECT_FALSE((*p)["metadata"].contains("ownerReferences"));
  EXPECT_EQ(condition(job(key), "Created", "reason"), "AlreadyExists");
  reconcile_synced(key);
  EXPECT_EQ(job(key)["status"]["workers"]["replicas"], 15) << "its own pods only";
  EXPECT_EQ(job(key)["status"]["phase"], "Blocked");

  // A foreign ConfigMap, labelled like ours (so in the cache): not applied over.
  Json rl = example("rljob-cluster.yaml");
  kube_.put(configmap_resource("research"), {{"apiVersion", "v1"},
                                             {"kind", "ConfigMap"},
                                             {"metadata",
                                              {{"name", "qwen-math-grpo-rl-spec"},
                                               {"namespace", "research"},
                                               {"labels", {{"tlt.dev/job", "qwen-math-grpo"}}}}},
                                             {"data", {{"job.json", "theirs"}}}});
  std::string rl_key = add(rl);
  r = reconcile_synced(rl_key);
  EXPECT_EQ(r.phase, "Blocked");
  EXPECT_EQ((*kube_.get(configmap_resource("research"), "qwen-math-grpo-rl-spec"))["data"],
            Json({{"job.json", "theirs"}}));
  EXPECT_EQ(kube_.calls("apply", "configmaps"), 0);
}

TEST_F(ReconcilerTest, Reconcile_PodsRefusedByApiserver_BlockedWithReasonTruncatedEvent) {
  std::string key = add(example("tst-cluster.yaml"));
  std::string refusal =
      "create pods/tst-small-kjv-workers-0: HTTP 403 Forbidden: pods is "
      "forbidden: violates PodSecurity \"restricted:latest\": " +
      std::string(2000, 'x');
  sync();
  reconciler_.reconcile(key);  // (creates the ConfigMap and Service, 16 pods)
  ASSERT_TRUE(kube_.remove(pod_resource("research"), "tst-small-kjv-workers-0").ok());
  kube_.fail_next("create", Status::FailedPrecondition(refusal));
  // (the first create of the next pass is the one pod missing)
  ReconcileResult r = reconcile_synced(key);
  EXPECT_EQ(r.status.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.phase, "Blocked");
  Json j = job(key);
  EXPECT_EQ(j["status"]["phase"], "Blocked");
  EXPECT_EQ(condition(j, "Created", "reason"), "Forbidden");
  std::string message = condition(j, "Created", "message");
  EXPECT_LT(message.size(), 450u) << "truncated";
  EXPECT_NE(message.find("violates PodSecurity"), std::string::npos) << message;
  EXPECT_EQ(events_with_reason("research", "Forbidden"), 1);
  EXPECT_EQ(j["status"]["workers"]["replicas"], 15) << "the counts stay right";
  set_phase("research", "tst-small-kjv-workers-1", "Running");  // the status changes, ...
  kube_.fail_next("create", Status::FailedPrecondition(refusal));
  EXPECT_EQ(reconcile_synced(key).phase, "Blocked");
  EXPECT_EQ(job(key)["status"]["workers"]["ready"], 7);  // workers-1 and -10 .. -15
  EXPECT_EQ(events_with_reason("research", "Forbidden"), 1) << "... the refusal does not";
  r = reconcile(key);  // the apiserver takes it now
  EXPECT_EQ(r.phase, "Pending");
  EXPECT_EQ(condition(job(key), "Created", "status"), "True");
}

// ---- children converge: policy revoked, lost labels, an edited Service --------------------------

TEST_F(ReconcilerTest, Reconcile_PolicyRevoked_FailedAndItsPodsDeleted) {
  Json rl = example("rljob-cluster.yaml");
  rl["spec"]["roles"]["trainer"]["podTemplate"] = {{"spec", {{"hostNetwork", true}}}};
  std::string key = add(rl);
  ReconcilerOptions allowing{PodOptions{"registry.example/tlt:test", 29500, {}, {}, {}}, 4};
  allowing.pod.policy.level = PodSecurityLevel::kPrivileged;  // hostNetwork allowed
  Reconciler lenient(&kube_, &cache_, &events_, &clock_, allowing);
  sync();
  ASSERT_TRUE(lenient.reconcile(key).status.ok());
  ASSERT_EQ(pod_names("research").size(), 9u);
  // The operator restarted at the default level, restricted.
  ReconcileResult r = reconcile(key);
  EXPECT_EQ(r.phase, "Failed");
  EXPECT_EQ(condition(job(key), "Failed", "reason"), "ForbiddenByPodPolicy");
  EXPECT_TRUE(pod_names("research").empty()) << "pods the policy now refuses do not run on";
  EXPECT_EQ(reconcile(key).phase, "Failed");
  EXPECT_EQ(events_with_reason("research", "ForbiddenByPodPolicy"), 2) << "deleted, failed";
}

// Removes `label` from the stored pod `name` of `ns`; returns the pod as it now is.
Json unlabel(kube::FakeKubeClient* kube, const std::string& ns, const std::string& name,
             const std::string& label) {
  Json p = *kube->get(pod_resource(ns), name);
  p["metadata"]["labels"].erase(label);
  kube->put(pod_resource(ns), p);
  return *kube->get(pod_resource(ns), name);
}

TEST_F(ReconcilerTest, Reconcile_PodLostItsLabelUnseen_FoundByNameRelabelledNotRecreated) {
  std::string key = add(example("tst-cluster.yaml"));
  reconcile(key);
  ASSERT_EQ(events_with_reason("research", "PodsCreated"), 1);
  // Removed while no watch reported it (e.g. the operator restarting): only the list shows.
  unlabel(&kube_, "research", "tst-small-kjv-workers-0", kJobLabel);
  kube_.reset_calls();
  reconcile(key);
  StatusOr<Json> p = kube_.get(pod_resource("research"), "tst-small-kjv-workers-0");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)["metadata"]["labels"][kJobLabel], "tst-small-kjv");
  EXPECT_EQ(pod_names("research").size(), 16u);
  EXPECT_EQ(events_with_reason("research", "PodsCreated"), 1) << "no Created pods for it";
  EXPECT_EQ(events_with_reason("research", "Relabeled"), 1);
  kube_.reset_calls();
  reconcile(key);
  EXPECT_EQ(kube_.calls("create", "pods"), 0) << "converged: back in the cache";
  EXPECT_EQ(events_with_reason("research", "Relabeled"), 1);
}

TEST_F(ReconcilerTest, Reconcile_StrayPod_SuspendScaleDownAndDeletionReachIt) {
  std::string key = add(example("tst-cluster.yaml"));
  reconcile(key);
  // kubectl label pod ...-workers-15 tlt.dev/job- : the selecting watch says DELETED, with the
  // pod as it was (the apiserver's watch cache).
  Json was = *kube_.get(pod_resource("research"), "tst-small-kjv-workers-15");
  unlabel(&kube_, "research", "tst-small-kjv-workers-15", kJobLabel);
  cache_.store("pods")->apply({"DELETED", was});
  edit(key, {{"workers", {{"replicas", 8}}}});
  // Another pod of the job deleted by someone else: a possible stray, read once, forgotten.
  Json other = *kube_.get(pod_resource("research"), "tst-small-kjv-workers-2");
  ASSERT_TRUE(kube_.remove(pod_resource("research"), "tst-small-kjv-workers-2").ok());
  cache_.store("pods")->apply({"DELETED", other});
  reconcile(key);
  EXPECT_EQ(pod_names("research").size(), 8u) << "the stray pod scaled down too";
  EXPECT_TRUE(cache_.store("pods")->strays("research", job(key)["metadata"]["uid"]).empty());
  EXPECT_FALSE(kube_.get(pod_resource("research"), "tst-small-kjv-workers-15").ok());
  // Suspend, with the tlt.dev/role label of another pod gone as well.
  Json p = unlabel(&kube_, "research", "tst-small-kjv-workers-3", kJobLabel);
  p = unlabel(&kube_, "research", "tst-small-kjv-workers-3", kRoleLabel);
  cache_.store("pods")->apply({"DELETED", p});
  edit(key, {{"suspend", true}});
  EXPECT_EQ(reconcile(key).phase, "Suspended");
  EXPECT_TRUE(pod_names("research").empty()) << "suspend reaches every pod the job owns";
  // Resumed, one pod strays, the job is deleted: nothing is left.
  edit(key, {{"suspend", false}});
  reconcile(key);
  ASSERT_EQ(pod_names("research").size(), 8u);
  p = unlabel(&kube_, "research", "tst-small-kjv-workers-5", kManagedByLabel);
  cache_.store("pods")->apply({"DELETED", p});
  ASSERT_TRUE(kube_.remove(job_resource("TSTPretrainJob", "research"), "tst-small-kjv").ok());
  reconcile(key);
  EXPECT_TRUE(job(key).is_null());
  EXPECT_TRUE(pod_names("research").empty());
  EXPECT_TRUE(kube_.objects(service_resource("research")).empty());
  EXPECT_TRUE(kube_.objects(configmap_resource("research")).empty());
}

TEST_F(ReconcilerTest, Reconcile_JobDeletedChildrenUnlabelledUnseen_DeletedByName) {
  std::string key = add(example("tst-cluster.yaml"));
  reconcile(key);
  // Labels removed while no watch reported it: the cache never shows these.
  unlabel(&kube_, "research", "tst-small-kjv-workers-7", kJobLabel);
  Json cm = *kube_.get(configmap_resource("research"), "tst-small-kjv-tst-spec");
  cm["metadata"]["labels"].erase(kManagedByLabel);
  kube_.put(configmap_resource("research"), cm);
  ASSERT_TRUE(kube_.remove(job_resource("TSTPretrainJob", "research"), "tst-small-kjv").ok());
  reconcile(key);
  EXPECT_TRUE(job(key).is_null());
  EXPECT_TRUE(pod_names("research").empty());
  EXPECT_TRUE(kube_.objects(configmap_resource("research")).empty());
}

TEST_F(ReconcilerTest, Reconcile_ServiceSpecEdited_RestoredOnce) {
  std::string key = add(example("tst-cluster.yaml"));
  reconcile(key);
  Json svc = *kube_.get(service_resource("research"), "tst-small-kjv-tst");
  const Json want = svc["spec"];
  svc["spec"]["ports"] = {{{"name", "web"}, {"port", 80}}};
  svc["spec"]["selector"]["app"] = "someone-else";
  kube_.put(service_resource("research"), svc);
  kube_.reset_calls();
  reconcile(key);
  Json now = (*kube_.get(service_resource("research"), "tst-small-kjv-tst"))["spec"];
  EXPECT_EQ(now["ports"], want["ports"]);
  EXPECT_EQ(now["selector"], want["selector"]);
  EXPECT_EQ(kube_.calls("patch", "services"), 1);
  EXPECT_EQ(events_with_reason("research", "ServiceRestored"), 1);
  kube_.reset_calls();
  reconcile(key);
  EXPECT_EQ(kube_.calls("patch", "services") + kube_.calls("apply", "services"), 0);
}

// ---- a stale cache: the watch lags the reconciler's own writes ----------------------------------

TEST_F(ReconcilerTest, Reconcile_CacheOlderThanOwnCreates_NoSecondCreate) {
  std::string key = add(example("tst-cluster.yaml"));
  sync();
  kube::ListOptions lo;
  lo.label_selector = kJobLabel;
  StatusOr<kube::ObjectList> before = kube_.list(pod_resource(""), lo);  // no pods yet
  ASSERT_TRUE(before.ok());
  ASSERT_TRUE(reconciler_.reconcile(key).status.ok());
  EXPECT_EQ(kube_.calls("create", "pods"), 16);
  // A list taken before the creates lands late, and no watch event has come: the pods written
  // through stay in the cache, so nothing is created again.
  cache_.store("pods")->replace(before->items, before->resource_version);
  kube_.reset_calls();
  ASSERT_TRUE(reconciler_.reconcile(key).status.ok());
  EXPECT_EQ(kube_.calls("create", "pods") + kube_.calls("apply"), 0);
  EXPECT_EQ(pod_names("research").size(), 16u);
  EXPECT_EQ(job(key)["status"]["workers"]["replicas"], 16);
}

TEST_F(ReconcilerTest, Reconcile_FailedPodDeletedEventLate_CountedOnce) {
  Json tst = example("tst-cluster.yaml");
  tst["spec"]["workers"]["replicas"] = 2;
  tst["spec"]["training"]["batchSize"] = 2;
  std::string key = add(tst);
  reconcile(key);
  set_phase("research", "tst-small-kjv-workers-1", "Failed");
  Json failed = *kube_.get(pod_resource("research"), "tst-small-kjv-workers-1");
  reconcile(key);
  EXPECT_EQ(job(key)["status"]["restarts"], 1);
  // The watch has not reported the deletion yet, and replays the Failed pod: still one restart,
  // no second delete (the pod is marked as being deleted until the watch says it is gone).
  cache_.store("pods")->apply({"MODIFIED", failed});
  kube_.reset_calls();
  ASSERT_TRUE(reconciler_.reconcile(key).status.ok());
  EXPECT_EQ(kube_.calls("remove"), 0);
  EXPECT_EQ(job(key)["status"]["restarts"], 1);
  // Once the deletion is seen, the pod is recreated under its name.
  cache_.store("pods")->apply({"DELETED", failed});
  ASSERT_TRUE(reconciler_.reconcile(key).status.ok());
  EXPECT_EQ(kube_.calls("create", "pods"), 1);
  EXPECT_EQ(job(key)["status"]["restarts"], 1);
}

TEST_F(ReconcilerTest, Reconcile_JobNotInCache_NothingDone) {
  std::string key = add(example("tst-cluster.yaml"));  // stored, but the cache has not seen it
  for (const char* plural : {"rljobs", "tstpretrainjobs", "pods", "services", "configmaps"})
    cache_.store(plural)->replace({}, "0");
  ReconcileResult r = reconciler_.reconcile(key);
  EXPECT_TRUE(r.status.ok());
  EXPECT_EQ(r.phase, "");
  EXPECT_EQ(kube_.calls("apply") + kube_.calls("patch") + kube_.calls("get"), 0)
      << "every read is from the cache";
}

TEST_F(ReconcilerTest, Reconcile_SteadyState_NoApiserverReads) {
  std::string key = add(example("rljob-cluster.yaml"));
  reconcile(key);
  set_phase("research", "qwen-math-grpo-", "Running");
  reconcile(key);
  sync();
  kube_.reset_calls();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(reconciler_.reconcile(key).status.ok());
  EXPECT_EQ(kube_.calls("get") + kube_.calls("list"), 0);
  EXPECT_EQ(kube_.calls("apply") + kube_.calls("patch") + kube_.calls("patch_status") +
                kube_.calls("create") + kube_.calls("remove"),
            0);
}

// ---- status from the pods' tlt.dev/progress reports ---------------------------------------------

}  // namespace
}  // namespace tlt::controller
