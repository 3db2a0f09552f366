// The reconciler against the fake apiserver (reconciler_fixture.h): the desired objects of each
// example, the job's own identity, scale up and down, suspend and resume, trainer ranks, failures
// and backoffLimit, completion and TTL.

#include "tests/operator/reconciler_fixture.h"

namespace tlt::controller {
namespace {

using namespace test;

TEST_F(ReconcilerTest, Reconcile_RLJobExample_CreatesPodsServiceConfigMap) {
  std::string key = add(example("rljob-cluster.yaml"));
  ReconcileResult r = reconcile(key);
  EXPECT_EQ(r.phase, "Pending");
  std::vector<std::string> pods = pod_names("research");
  std::vector<std::string> want;
  for (int i = 0; i < 8; ++i) want.push_back("qwen-math-grpo-rollout-" + std::to_string(i));
  want.push_back("qwen-math-grpo-trainer-0");
  std::sort(want.begin(), want.end());
  EXPECT_EQ(pods, want) << "8 rollout + 1 trainer, no drafter (replicas 0)";

  Json j = job(key);
  StatusOr<Json> pod = kube_.get(pod_resource("research"), "qwen-math-grpo-rollout-3");
  ASSERT_TRUE(pod.ok());
  const Json& meta = (*pod)["metadata"];
  EXPECT_EQ(meta["labels"]["tlt.dev/job"], "qwen-math-grpo");
  EXPECT_EQ(meta["labels"]["tlt.dev/role"], "rollout");
  EXPECT_EQ(meta["labels"]["tlt.dev/index"], "3");
  EXPECT_EQ(meta["labels"]["team"], "reasoning") << "the job's labels are copied";
  ASSERT_EQ(meta["ownerReferences"].size(), 1u);
  EXPECT_EQ(meta["ownerReferences"][0]["uid"], j["metadata"]["uid"]);
  EXPECT_EQ(meta["ownerReferences"][0]["controller"], true);
  EXPECT_EQ(meta["ownerReferences"][0]["kind"], "RLJob");
  const Json& spec = (*pod)["spec"];
  EXPECT_EQ(spec["restartPolicy"], "Never");
  EXPECT_EQ(spec["nodeSelector"]["nvidia.com/gpu.product"], "NVIDIA-H100-80GB-HBM3")
      << "the podTemplate is merged in";
  EXPECT_EQ(spec["tolerations"][0]["key"], "nvidia.com/gpu");
  EXPECT_EQ(spec["subdomain"], "qwen-math-grpo-rl") << "the RLJob's Service";
  EXPECT_EQ(meta["labels"]["tlt.dev/kind"], "RLJob");
  const Json& c = spec["containers"][0];
  EXPECT_EQ(c["name"], "tlt");
  EXPECT_EQ(c["image"], "registry.example/tlt:test");
  EXPECT_EQ(c["command"], Json({"tlt", "run-role"}));
  EXPECT_EQ(c["resources"]["limits"]["nvidia.com/gpu"], "1");
  EXPECT_EQ(c["resources"]["requests"]["memory"], "64Gi");
  std::map<std::string, std::string> env;
  for (const Json& e : c["env"]) env[e["name"]] = e["value"];
  EXPECT_EQ(env["TLT_JOB"], "qwen-math-grpo");
  EXPECT_EQ(env["TLT_ROLE"], "rollout");
  EXPECT_EQ(env["TLT_INDEX"], "3");
  EXPECT_EQ(env["TLT_JOB_FILE"], "/etc/tlt/job.json");
  EXPECT_EQ(env["TLT_RENDEZVOUS_PORT"], "29500")
      << "the headless Service's port, where rollout pods find the trainer";
  EXPECT_EQ(c["volumeMounts"][0]["mountPath"], "/etc/tlt");
  // The restricted Pod Security Standard: the runtime image's user, no privilege, read-only root.
  EXPECT_EQ(spec["securityContext"], Json({{"runAsNonRoot", true},
                                           {"runAsUser", 65532},
                                           {"runAsGroup", 65532},
                                           {"seccompProfile", {{"type", "RuntimeDefault"}}}}));
  EXPECT_EQ(c["securityContext"], Json({{"allowPrivilegeEscalation", false},
                                        {"capabilities", {{"drop", {"ALL"}}}},
                                        {"readOnlyRootFilesystem", true}}));
  EXPECT_EQ(c["volumeMounts"][1], Json({{"name", "tlt-tmp"}, {"mountPath", "/tmp"}}));
  EXPECT_EQ(env["TLT_SERVICE"], "qwen-math-grpo-rl.research.svc");
  EXPECT_EQ(env["TLT_WEIGHT_SYNC_ADDRESS"],
            "qwen-math-grpo-trainer-0.qwen-math-grpo-rl.research.svc:29501")
      << "where the pods join the weight-sync group";
  EXPECT_FALSE(c.contains("ports")) << "only trainer pod 0 hosts the weight-sync group";
  EXPECT_EQ(spec["volumes"][0]["configMap"]["name"], "qwen-math-grpo-rl-spec");
  StatusOr<Json> trainer = kube_.get(pod_resource("research"), "qwen-math-grpo-trainer-0");
  ASSERT_TRUE(trainer.ok());
  EXPECT_FALSE((*trainer)["spec"].contains("nodeSelector")) << "the rollout's template only";
  EXPECT_EQ((*trainer)["spec"]["containers"][0]["resources"]["requests"]["cpu"], "16");
  EXPECT_EQ((*trainer)["spec"]["containers"][0]["ports"][0],
            Json({{"name", "weight-sync"}, {"containerPort", 29501}, {"protocol", "TCP"}}));

  StatusOr<Json> svc = kube_.get(service_resource("research"), "qwen-math-grpo-rl");
  ASSERT_TRUE(svc.ok());
  EXPECT_EQ((*svc)["spec"]["clusterIP"], "None");
  EXPECT_EQ((*svc)["spec"]["ports"][1],
            Json({{"name", "weight-sync"}, {"port", 29501}, {"protocol", "TCP"}}));
  EXPECT_EQ((*svc)["spec"]["selector"],
            Json({{"tlt.dev/job", "qwen-math-grpo"}, {"tlt.dev/kind", "RLJob"}}));
  StatusOr<Json> cm = kube_.get(configmap_resource("research"), "qwen-math-grpo-rl-spec");
  ASSERT_TRUE(cm.ok());
  StatusOr<api::Job> decoded =
      api::parse_job_json(Json::parse(std::string((*cm)["data"]["job.json"])));
  ASSERT_TRUE(decoded.ok()) << "the runtime can decode the ConfigMap: "
                            << decoded.status().to_string();
  EXPECT_EQ(std::get<api::RLJob>(*decoded).spec.roles.rollout.replicas, 8);

  for (const auto& [object, manager] : kube_.appliers())
    EXPECT_EQ(manager, "tlt-operator") << object;
  EXPECT_EQ(j["metadata"]["finalizers"], Json({"tlt.dev/cleanup"}));
  EXPECT_EQ(j["status"]["phase"], "Pending");
  EXPECT_EQ(j["status"]["observedGeneration"], j["metadata"]["generation"]);
  EXPECT_EQ(condition(j, "Created", "status"), "True");
  EXPECT_EQ(condition(j, "Running", "status"), "False");
  EXPECT_EQ(condition(j, "Running", "reason"), "PodsNotReady");
  EXPECT_GE(kube_.calls("create", "events"), 1) << "an Event per decision";
}

TEST_F(ReconcilerTest, Reconcile_TSTExample_CreatesWorkers) {
  std::string key = add(example("tst-cluster.yaml"));
  reconcile(key);
  std::vector<std::string> pods = pod_names("research");
  EXPECT_EQ(pods.size(), 16u);
  EXPECT_TRUE(std::find(pods.begin(), pods.end(), "tst-small-kjv-workers-15") != pods.end());
  Json j = job(key);
  EXPECT_EQ(j["status"]["workers"]["replicas"], 0) << "counted as observed before the creates";
  EXPECT_FALSE(j["status"].contains("roles"));
}

// The names a Role rule grants `verb` on pods for; empty when no rule grants it.
std::vector<std::string> granted(const Json& role, const std::string& verb) {
  std::vector<std::string> out;
  for (const Json& rule : role["rules"]) {
    if (rule["verbs"] != Json({verb})) continue;
    EXPECT_EQ(rule["resources"], Json({"pods"}));
    EXPECT_EQ(rule["apiGroups"], Json({""}));
    EXPECT_FALSE(rule["resourceNames"].empty()) << "an empty list would allow every name";
    for (const Json& n : rule["resourceNames"]) out.push_back(n);
  }
  return out;
}

TEST_F(ReconcilerTest, Reconcile_RLJobExample_OwnIdentityGetsItsPodsPatchesTrainer) {
  std::string key = add(example("rljob-cluster.yaml"));
  reconcile(key);
  Json j = job(key);
  StatusOr<Json> sa = kube_.get(serviceaccount_resource("research"), "qwen-math-grpo-rl");
  ASSERT_TRUE(sa.ok());
  EXPECT_EQ((*sa)["automountServiceAccountToken"], false);
  EXPECT_TRUE(owned_by(*sa, j["metadata"]["uid"]));
  StatusOr<Json> role = kube_.get(role_resource("research"), "qwen-math-grpo-rl");
  ASSERT_TRUE(role.ok());
  EXPECT_TRUE(owned_by(*role, j["metadata"]["uid"]));
  ASSERT_EQ((*role)["rules"].size(), 2u) << role->dump();
  std::vector<std::string> pods = pod_names("research");
  EXPECT_EQ(granted(*role, "get"), pods) << "get: exactly the job's 9 pods";
  EXPECT_EQ(granted(*role, "patch"), std::vector<std::string>{"qwen-math-grpo-trainer-0"});
  StatusOr<Json> binding = kube_.get(rolebinding_resource("research"), "qwen-math-grpo-rl");
  ASSERT_TRUE(binding.ok());
  EXPECT_TRUE(owned_by(*binding, j["metadata"]["uid"]));
  EXPECT_EQ((*binding)["roleRef"], Json({{"apiGroup", "rbac.authorization.k8s.io"},
                                         {"kind", "Role"},
                                         {"name", "qwen-math-grpo-rl"}}));
  EXPECT_EQ((*binding)["subjects"], Json::array({{{"kind", "ServiceAccount"},
                                                  {"name", "qwen-math-grpo-rl"},
                                                  {"namespace", "research"}}}));
  for (const std::string& name : pods) {
    StatusOr<Json> pod = kube_.get(pod_resource("research"), name);
    ASSERT_TRUE(pod.ok());
    EXPECT_EQ((*pod)["spec"]["serviceAccountName"], "qwen-math-grpo-rl") << name;
    EXPECT_EQ((*pod)["spec"]["automountServiceAccountToken"], false)
        << name << ": no container gets the token by admission";
    bool token = false;
    for (const Json& v : (*pod)["spec"]["volumes"]) token = token || v["name"] == "tlt-token";
    EXPECT_EQ(token, name == "qwen-math-grpo-trainer-0")
        << name << ": only the trainer's runtime uses the apiserver (job_network_test.cc)";
  }
  kube_.reset_calls();
  reconcile(key);
  EXPECT_EQ(kube_.calls("create") + kube_.calls("apply"), 0) << "nothing to change";
}

TEST_F(ReconcilerTest, Reconcile_ReplicasEditedOrRoleTampered_RoleFollowsThePods) {
  std::string key = add(example("rljob-cluster.yaml"));
  reconcile(key);
  edit(key, {{"roles", {{"rollout", {{"replicas", 4}}}, {"drafter", {{"replicas", 1}}}}}});
  EXPECT_EQ(reconcile(key).phase, "Pending");
  StatusOr<Json> role = kube_.get(role_resource("research"), "qwen-math-grpo-rl");
  ASSERT_TRUE(role.ok());
  EXPECT_EQ(granted(*role, "get"),
            (std::vector<std::string>{"qwen-math-grpo-drafter-0", "qwen-math-grpo-rollout-0",
                                      "qwen-math-grpo-rollout-1", "qwen-math-grpo-rollout-2",
                                      "qwen-math-grpo-rollout-3", "qwen-math-grpo-trainer-0"}));
  EXPECT_EQ(granted(*role, "get"), pod_names("research"));
  // Someone widens the Role by hand: the next pass puts it back.
  (*role)["rules"] = Json::array(
      {{{"apiGroups", {""}}, {"resources", {"pods", "secrets"}}, {"verbs", {"get", "list"}}}});
  kube_.put(role_resource("research"), *role);
  reconcile(key);
  role = kube_.get(role_resource("research"), "qwen-math-grpo-rl");
  ASSERT_TRUE(role.ok());
  ASSERT_EQ((*role)["rules"].size(), 2u) << role->dump();
  EXPECT_EQ(granted(*role, "get").size(), 6u);
  EXPECT_EQ(granted(*role, "patch"), std::vector<std::string>{"qwen-math-grpo-trainer-0"});
}

TEST_F(ReconcilerTest, Reconcile_TSTExample_OwnIdentityNoTokenMounted) {
  std::string key = add(example("tst-cluster.yaml"));
  reconcile(key);
  StatusOr<Json> role = kube_.get(role_resource("research"), "tst-small-kjv-tst");
  ASSERT_TRUE(role.ok());
  EXPECT_EQ(granted(*role, "get").size(), 16u);
  EXPECT_EQ(granted(*role, "patch"), std::vector<std::string>{"tst-small-kjv-workers-0"});
  for (const std::string& name : pod_names("research")) {
    StatusOr<Json> pod = kube_.get(pod_resource("research"), name);
    ASSERT_TRUE(pod.ok());
    EXPECT_EQ((*pod)["spec"]["serviceAccountName"], "tst-small-kjv-tst");
    EXPECT_EQ((*pod)["spec"]["automountServiceAccountToken"], false) << name;
  }
}

TEST_F(ReconcilerTest, Reconcile_TemplateNamesAdminServiceAccount_PodsRunAsIt) {
  Json rl = example("rljob-cluster.yaml");
  rl["spec"]["roles"]["trainer"]["podTemplate"] = {{"spec", {{"serviceAccountName", "reader"}}}};
  std::string key = add(rl);
  ReconcileResult r = reconcile(key);
  EXPECT_EQ(r.phase, "Failed") << "not in the admin's list";
  EXPECT_TRUE(pod_names("research").empty());
  ReconcilerOptions allowing{PodOptions{"registry.example/tlt:test", 29500, {}, {}, {}}, 4};
  allowing.pod.policy.service_accounts = {"reader"};
  Reconciler admin(&kube_, &cache_, &events_, &clock_, allowing);
  sync();
  r = admin.reconcile(key);
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  StatusOr<Json> trainer = kube_.get(pod_resource("research"), "qwen-math-grpo-trainer-0");
  ASSERT_TRUE(trainer.ok());
  EXPECT_EQ((*trainer)["spec"]["serviceAccountName"], "reader") << "the admin's choice";
  StatusOr<Json> rollout = kube_.get(pod_resource("research"), "qwen-math-grpo-rollout-0");
  ASSERT_TRUE(rollout.ok());
  EXPECT_EQ((*rollout)["spec"]["serviceAccountName"], "qwen-math-grpo-rl");
}

TEST_F(ReconcilerTest, Reconcile_ForeignServiceAccountOfTheName_NotAdoptedJobBlocked) {
  kube_.put(serviceaccount_resource("research"),
            {{"apiVersion", "v1"},
             {"kind", "ServiceAccount"},
             {"metadata", {{"name", "qwen-math-grpo-rl"}, {"namespace", "research"}}}});
  std::string key = add(example("rljob-cluster.yaml"));
  ReconcileResult r = reconcile_synced(key);
  EXPECT_EQ(r.status.code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(r.phase, "Blocked");
  EXPECT_TRUE(pod_names("research").empty()) << "no pod runs as someone else's identity";
  EXPECT_TRUE(kube_.objects(rolebinding_resource("research")).empty()) << "nothing bound to it";
  StatusOr<Json> sa = kube_.get(serviceaccount_resource("research"), "qwen-math-grpo-rl");
  ASSERT_TRUE(sa.ok());
  EXPECT_FALSE((*sa)["metadata"].contains("ownerReferences")) << "not adopted";
  EXPECT_NE(condition(job(key), "Created", "message")
                .find("ServiceAccount qwen-math-grpo-rl already exists"),
            std::string::npos);
}

TEST_F(ReconcilerTest, Reconcile_AllPodsReady_RunningAndThenNoWrites) {
  std::string key = add(example("rljob-cluster.yaml"));
  reconcile(key);
  set_phase("research", "qwen-math-grpo-", "Running");
  ReconcileResult r = reconcile(key);
  EXPECT_EQ(r.phase, "Running");
  Json j = job(key);
  EXPECT_EQ(j["status"]["roles"]["rollout"]["ready"], 8);
  EXPECT_EQ(j["status"]["roles"]["trainer"]["ready"], 1);
  EXPECT_EQ(condition(j, "Running", "status"), "True");
  EXPECT_EQ(j["status"]["startTime"], "2023-11-14T22:13:20Z");

  // Nothing changed: no status patch, no apply, no delete, no event.
  kube_.reset_calls();
  clock_.advance(std::chrono::seconds(60));
  reconcile(key);
  EXPECT_EQ(kube_.calls("patch_status"), 0);
  EXPECT_EQ(kube_.calls("apply"), 0);
  EXPECT_EQ(kube_.calls("remove"), 0);
  EXPECT_EQ(kube_.calls("create"), 0);
  // A pod turning not-ready is a change.
  set_phase("research", "qwen-math-grpo-rollout-2", "Pending");
  reconcile(key);
  EXPECT_EQ(kube_.calls("patch_status"), 1);
  j = job(key);
  EXPECT_EQ(j["status"]["phase"], "Pending");
  EXPECT_EQ(condition(j, "Running", "message"), "8 of 9 pods running and ready.");
  EXPECT_EQ(condition(j, "Created", "lastTransitionTime"), "2023-11-14T22:13:20Z")
      << "an unchanged condition keeps its transition time";
}

TEST_F(ReconcilerTest, Reconcile_ReplicasEdited_ScalesUpAndDownHighestFirst) {
  std::string key = add(example("rljob-cluster.yaml"));
  reconcile(key);
  edit(key, {{"roles", {{"rollout", {{"replicas", 10}}}, {"drafter", {{"replicas", 1}}}}}});
  reconcile(key);
  std::vector<std::string> pods = pod_names("research");
  EXPECT_EQ(pods.size(), 12u);
  EXPECT_TRUE(std::find(pods.begin(), pods.end(), "qwen-math-grpo-rollout-9") != pods.end());
  EXPECT_TRUE(std::find(pods.begin(), pods.end(), "qwen-math-grpo-drafter-0") != pods.end());
  EXPECT_EQ(job(key)["status"]["observedGeneration"], 2);

  logs_.clear();
  edit(key, {{"roles", {{"rollout", {{"replicas", 4}}}, {"drafter", {{"replicas", 0}}}}}});
  reconcile(key);
  EXPECT_EQ(pod_names("research").size(), 5u);
  std::vector<std::string> deleted = deleted_in_order();
  std::vector<std::string> want{"qwen-math-grpo-rollout-9", "qwen-math-grpo-rollout-8",
                                "qwen-math-grpo-rollout-7", "qwen-math-grpo-rollout-6",
                                "qwen-math-grpo-rollout-5", "qwen-math-grpo-rollout-4",
                                "qwen-math-grpo-drafter-0"};
  std::vector<std::string> rollout(deleted.begin(), deleted.end());
  rollout.erase(std::remove(rollout.begin(), rollout.end(), "qwen-math-grpo-drafter-0"),
                rollout.end());
  EXPECT_EQ(rollout, std::vector<std::string>(want.begin(), want.begin() + 6));
  EXPECT_EQ(deleted.size(), 7u);
}

TEST_F(ReconcilerTest, Reconcile_SuspendThenResume_DeletesPodsKeepsJobThenRecreates) {
  std::string key = add(example("tst-cluster.yaml"));
  reconcile(key);
  edit(key, {{"suspend", true}});
  ReconcileResult r = reconcile(key);
  EXPECT_EQ(r.phase, "Suspended");
  EXPECT_TRUE(pod_names("research").empty());
  Json j = job(key);
  EXPECT_EQ(condition(j, "Suspended", "status"), "True");
  EXPECT_EQ(condition(j, "Running", "reason"), "Suspended");
  EXPECT_EQ(condition(j, "Created", "status"), "False") << "the pods were deleted";
  EXPECT_EQ(condition(j, "Created", "reason"), "PodsSuspended");
  EXPECT_TRUE(kube_.get(service_resource("research"), "tst-small-kjv-tst").ok()) << "kept";
  EXPECT_TRUE(kube_.get(configmap_resource("research"), "tst-small-kjv-tst-spec").ok()) << "kept";

  edit(key, {{"suspend", false}});
  kube_.reset_calls();
  reconcile(key);
  EXPECT_EQ(kube_.calls("create", "pods"), 16) << "every pod recreated on resume";
  j = job(key);
  EXPECT_EQ(j["status"]["phase"], "Pending");
  EXPECT_EQ(condition(j, "Suspended", "status"), "False");
  EXPECT_EQ(condition(j, "Created", "status"), "True");
  EXPECT_EQ(condition(j, "Created", "reason"), "ObjectsCreated");
}

// The env of a pod's "tlt" container, by name; {} when the pod does not exist.
std::map<std::string, std::string> tlt_env(kube::FakeKubeClient& kube, const std::string& pod) {
  std::map<std::string, std::string> env;
  StatusOr<Json> p = kube.get(pod_resource("research"), pod);
  if (!p.ok()) return env;
  for (const Json& e : (*p)["spec"]["containers"][0]["env"]) env[e["name"]] = e["value"];
  return env;
}

TEST_F(ReconcilerTest, Reconcile_TwoTrainerRanks_RankWorldGroupAddressServicePort) {
  Json rl = example("rljob-cluster.yaml");
  rl["spec"]["roles"]["trainer"]["replicas"] = 2;
  std::string key = add(rl);
  reconcile(key);
  const std::string job = "qwen-math-grpo";
  for (int rank : {0, 1}) {
    SCOPED_TRACE(rank);
    const std::string name = job + "-trainer-" + std::to_string(rank);
    std::map<std::string, std::string> env = tlt_env(kube_, name);
    EXPECT_EQ(env["TLT_INDEX"], std::to_string(rank)) << "the rank";
    EXPECT_EQ(env["TLT_TRAINER_WORLD"], "2");
    EXPECT_EQ(env["TLT_TRAINER_GROUP_PORT"], "29502");
    EXPECT_EQ(env["TLT_TRAINER_GROUP_ADDRESS"],
              job + "-trainer-0." + job + "-rl.research.svc:29502");
    Json pod = *kube_.get(pod_resource("research"), name);
    EXPECT_EQ(pod["metadata"]["labels"]["tlt.dev/trainer-world"], "2");
  }
  auto tlt_container = [&](const std::string& pod) {
    return (*kube_.get(pod_resource("research"), pod))["spec"]["containers"][0];
  };
  EXPECT_EQ(
      tlt_container(job + "-trainer-0")["ports"],
      Json::array({{{"name", "weight-sync"}, {"containerPort", 29501}, {"protocol", "TCP"}},
                   {{"name", "trainer-group"}, {"containerPort", 29502}, {"protocol", "TCP"}}}))
      << "rank 0 hosts the group's store";
  EXPECT_FALSE(tlt_container(job + "-trainer-1").contains("ports"));
  EXPECT_EQ(tlt_env(kube_, job + "-rollout-0").count("TLT_TRAINER_WORLD"), 0u)
      << "only trainer pods are ranks";
  Json svc = *kube_.get(service_resource("research"), job + "-rl");
  EXPECT_EQ(svc["spec"]["ports"][2],
            Json({{"name", "trainer-group"}, {"port", 29502}, {"protocol", "TCP"}}));
  EXPECT_EQ(condition(this->job(key), "TrainerScalePending", "status"), "(none)")
      << "nothing to say while the spec and the group agree";
}

// A running trainer group keeps its world: a replicas edit is held back with a condition, failed
// ranks come back in the old world, and the edit takes effect after a suspend and resume.
TEST_F(ReconcilerTest, Reconcile_TrainerReplicasEdited_WorldKeptUntilSuspendedAndResumed) {
  Json rl = example("rljob-cluster.yaml");
  rl["spec"]["roles"]["trainer"]["replicas"] = 2;
  std::string key = add(rl);
  const std::string t = "qwen-math-grpo-trainer-";
  reconcile(key);
  set_phase("research", "qwen-math-grpo-", "Running");
  reconcile(key);
  EXPECT_EQ(job(key)["status"]["phase"], "Running");

  edit(key, {{"roles", {{"trainer", {{"replicas", 3}}}}}});
  ReconcileResult r = reconcile(key);
  EXPECT_EQ(r.phase, "Running") << "the two ranks still run";
  EXPECT_FALSE(kube_.get(pod_resource("research"), t + "2").ok()) << "no third rank";
  Json j = job(key);
  EXPECT_EQ(condition(j, "TrainerScalePending", "status"), "True");
  EXPECT_EQ(condition(j, "TrainerScalePending", "reason"), "WorldSizeFixed");
  std::string message = condition(j, "TrainerScalePending", "message");
  EXPECT_NE(message.find("spec.roles.trainer.replicas is 3, but the running trainer group has 2"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("suspended and resumed"), std::string::npos) << message;
  EXPECT_EQ(events_with_reason("research", "TrainerScalePending"), 1);
  Json cm = *kube_.get(configmap_resource("research"), "qwen-math-grpo-rl-spec");
  Json stored_spec = Json::parse(std::string(cm["data"]["job.json"]))["spec"];
  EXPECT_EQ(stored_spec["roles"]["trainer"]["replicas"], 2)
      << "the runtime reads the world that runs";
  reconcile(key);
  EXPECT_EQ(events_with_reason("research", "TrainerScalePending"), 1) << "told once";

  set_phase("research", t + "1", "Failed");
  reconcile(key);
  reconcile(key);
  EXPECT_EQ(tlt_env(kube_, t + "1")["TLT_TRAINER_WORLD"], "2") << "a restarted rank rejoins";

  edit(key, {{"roles", {{"trainer", {{"replicas", 1}}}}}});
  reconcile(key);
  EXPECT_TRUE(kube_.get(pod_resource("research"), t + "1").ok()) << "not scaled down either";
  EXPECT_NE(condition(job(key), "TrainerScalePending", "message")
                .find("spec.roles.trainer.replicas is 1"),
            std::string::npos);

  edit(key, {{"suspend", true}, {"roles", {{"trainer", {{"replicas", 3}}}}}});
  reconcile(key);
  EXPECT_TRUE(pod_names("research").empty());
  edit(key, {{"suspend", false}});
  reconcile(key);
  for (int rank : {0, 1, 2}) {
    EXPECT_EQ(tlt_env(kube_, t + std::to_string(rank))["TLT_TRAINER_WORLD"], "3") << rank;
  }
  j = job(key);
  EXPECT_EQ(condition(j, "TrainerScalePending", "status"), "False");
  EXPECT_EQ(condition(j, "TrainerScalePending", "reason"), "WorldMatchesSpec");
}

TEST_F(ReconcilerTest, Reconcile_PodFailed_RecreatedCountedThenFailedPastBackoffLimit) {
  Json tst = example("tst-cluster.yaml");  // backoffLimit 2
  tst["spec"]["workers"]["replicas"] = 2;
  tst["spec"]["training"]["batchSize"] = 2;
  std::string key = add(tst);
  reconcile(key);
  for (int failure = 1; failure <= 2; ++failure) {
    set_phase("research", "tst-small-kjv-workers-1", "Failed");
    ReconcileResult r = reconcile(key);
    EXPECT_EQ(job(key)["status"]["restarts"], failure);
    EXPECT_NE(r.phase, "Failed") << "failure " << failure << " is within backoffLimit 2";
    EXPECT_FALSE(kube_.get(pod_resource("research"), "tst-small-kjv-workers-1").ok())
        << "the failed pod is deleted";
    reconcile(key);  // ...and recreated under its name
    EXPECT_TRUE(kube_.get(pod_resource("research"), "tst-small-kjv-workers-1").ok());
  }
  set_phase("research", "tst-small-kjv-workers-", "Running");
  set_phase("research", "tst-small-kjv-workers-0", "Failed");
  ReconcileResult r = reconcile(key);
  EXPECT_EQ(r.phase, "Failed");
  Json j = job(key);
  EXPECT_EQ(j["status"]["restarts"], 3);
  EXPECT_EQ(condition(j, "Failed", "reason"), "BackoffLimitExceeded");
  EXPECT_EQ(condition(j, "Failed", "message"), "3 pod failures exceed spec.backoffLimit 2.");
  EXPECT_TRUE(pod_names("research").empty()) << "the running worker is deleted too";
  EXPECT_FALSE(j["status"].value("completionTime", "").empty());
  // Failed is kept: nothing is recreated.
  kube_.reset_calls();
  reconcile(key);
  EXPECT_EQ(kube_.calls("apply"), 0);
  EXPECT_EQ(job(key)["status"]["phase"], "Failed");
}

TEST_F(ReconcilerTest, Reconcile_TrainerSucceeded_SucceededThenDeletedAfterTTL) {
  Json rl = example("rljob-cluster.yaml");
  rl["spec"]["ttlSecondsAfterFinished"] = 600;
  std::string key = add(rl);
  reconcile(key);
  set_phase("research", "qwen-math-grpo-", "Running");
  reconcile(key);
  set_phase("research", "qwen-math-grpo-trainer-0", "Succeeded");
  ReconcileResult r = reconcile(key);
  EXPECT_EQ(r.phase, "Succeeded");
  Json j = job(key);
  EXPECT_EQ(condition(j, "Succeeded", "status"), "True");
  EXPECT_EQ(condition(j, "Succeeded", "reason"), "AllPodsSucceeded");
  EXPECT_EQ(pod_names("research"), std::vector<std::string>{"qwen-math-grpo-trainer-0"})
      << "the rollout pods still running are deleted; the trainer's is kept";
  r = reconcile(key);
  ASSERT_TRUE(r.requeue_after.has_value());
  EXPECT_EQ(r.requeue_after->count(), 601);
  clock_.advance(std::chrono::seconds(601));
  reconcile(key);
  j = job(key);
  EXPECT_TRUE(j["metadata"].contains("deletionTimestamp")) << "TTL: the job is deleted";
  reconcile(key);  // the finalizer cleans up
  EXPECT_TRUE(job(key).is_null());
  EXPECT_TRUE(pod_names("research").empty());
  EXPECT_TRUE(kube_.objects(service_resource("research")).empty());
  EXPECT_TRUE(kube_.objects(configmap_resource("research")).empty());
}

}  // namespace
}  // namespace tlt::controller
