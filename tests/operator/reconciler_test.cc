// The reconciler against an in-memory KubeClient (kube/fake_client.h), an informer cache
// filled from it by a list before each pass (as the informers would; tests of a stale cache skip
// that), and a fake clock: the desired objects of each example, scale up and down, suspend and
// resume, failures and backoffLimit, completion, TTL, invalid specs, deletion through the
// finalizer, that status is patched only when it changes, that a stale cache neither creates
// twice nor counts a failure twice, and status from the pods' progress reports.
#include <algorithm>
#include <fstream>
#include <functional>
#include <sstream>

#include <gtest/gtest.h>

#include "api/encode.h"
#include "api/manifest.h"
#include "kube/fake_client.h"
#include "operator/controller/log.h"
#include "operator/controller/pod_template.h"
#include "operator/controller/reconciler.h"

namespace tlt::controller {
namespace {

using Json = nlohmann::json;

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// An example manifest as the apiserver would store it: defaults filled in, no status.
Json example(const std::string& file) {
  StatusOr<api::Job> job =
      api::parse_job_yaml(read(std::string(TLT_SOURCE_DIR) + "/examples/" + file));
  EXPECT_TRUE(job.ok()) << job.status().to_string();
  Json j = std::visit([](const auto& x) { return api::to_json(x); }, job.value());
  j.erase("status");
  return j;
}

// The fake apiserver, with a hook a test may set to run (and throw) inside create().
class HookedKubeClient : public kube::FakeKubeClient {
 public:
  StatusOr<Json> create(const kube::Resource& r, const Json& object) override {
    if (on_create) on_create(r, object);
    return FakeKubeClient::create(r, object);
  }
  std::function<void(const kube::Resource&, const Json&)> on_create;  // set before reconciling
};

class ReconcilerTest : public ::testing::Test {
 protected:
  ReconcilerTest()
      : clock_(std::chrono::system_clock::from_time_t(1700000000)),
        events_(&kube_, &clock_, "tlt-operator"),
        reconciler_(
            &kube_, &cache_, &events_, &clock_,
            ReconcilerOptions{PodOptions{"registry.example/tlt:test", 29500, {}, {}, {}}, 4}) {
    set_log_sink([this](const std::string& line) { logs_.push_back(line); });
  }
  ~ReconcilerTest() override { set_log_sink(nullptr); }

  // Stores `job` and returns its key.
  std::string add(const Json& job) {
    std::string kind = job["kind"], ns = job["metadata"]["namespace"],
                name = job["metadata"]["name"];
    kube_.put(job_resource(kind, ns), job);
    return job_key(kind, ns, name);
  }
  // Fills the cache from the fake apiserver, as the informers' lists would.
  void sync() {
    // The jobs first: the owned types' stores admit only children of known jobs.
    std::vector<kube::Resource> all = {job_resource("RLJob", ""),
                                       job_resource("TSTPretrainJob", "")};
    for (const kube::Resource& r : owned_resources("")) all.push_back(r);
    for (const kube::Resource& r : all) {
      kube::ListOptions lo;
      if (r.group != api::kGroup)
        lo.label_selector = owned_selector();  // the owned types, as the informers
      StatusOr<kube::ObjectList> list = kube_.list(r, lo);
      ASSERT_TRUE(list.ok()) << list.status().to_string();
      cache_.store(r.plural)->replace(list->items, list->resource_version);
    }
  }
  // A pass on a synced cache; fails the test unless it returns OK.
  ReconcileResult reconcile(const std::string& key) {
    ReconcileResult r = reconcile_synced(key);
    EXPECT_TRUE(r.status.ok()) << r.status.to_string();
    return r;
  }
  ReconcileResult reconcile_synced(const std::string& key) {
    sync();
    return reconciler_.reconcile(key);
  }
  Json job(const std::string& key) {
    std::string kind, ns, name;
    parse_key(key, &kind, &ns, &name);
    StatusOr<Json> j = kube_.get(job_resource(kind, ns), name);
    return j.ok() ? *j : Json();
  }
  // Edits the stored job's spec with a merge patch (generation goes up, as on an apiserver).
  void edit(const std::string& key, const Json& spec_patch) {
    Json j = job(key);
    j["spec"].merge_patch(spec_patch);
    std::string kind = j["kind"];
    kube_.put(job_resource(kind, j["metadata"]["namespace"]), j);
  }
  std::vector<std::string> pod_names(const std::string& ns, bool include_deleting = false) {
    std::vector<std::string> names;
    for (const Json& p : kube_.objects(pod_resource(ns))) {
      if (!include_deleting && p["metadata"].contains("deletionTimestamp")) continue;
      names.push_back(p["metadata"]["name"]);
    }
    return names;
  }
  // Sets the phase of every pod in `ns` whose name starts with `prefix` (Running also Ready).
  void set_phase(const std::string& ns, const std::string& prefix, const std::string& phase) {
    for (Json p : kube_.objects(pod_resource(ns))) {
      std::string name = p["metadata"]["name"];
      if (name.rfind(prefix, 0) != 0) continue;
      p["status"] = {{"phase", phase}};
      if (phase == "Running") p["status"]["conditions"] = {{{"type", "Ready"}, {"status", "True"}}};
      kube_.put(pod_resource(ns), p);
    }
  }
  // Sets (or, with "", removes) a pod's tlt.dev/progress annotation, as the runtime would.
  void annotate(const std::string& ns, const std::string& pod, const std::string& progress) {
    StatusOr<Json> p = kube_.get(pod_resource(ns), pod);
    ASSERT_TRUE(p.ok()) << pod;
    if (progress.empty()) {
      (*p)["metadata"]["annotations"].erase(kProgressAnnotation);
    } else {
      (*p)["metadata"]["annotations"][kProgressAnnotation] = progress;
    }
    kube_.put(pod_resource(ns), *p);
  }
  int count_logs(const std::string& needle) const {
    return static_cast<int>(std::count_if(logs_.begin(), logs_.end(), [&](const std::string& l) {
      return l.find(needle) != std::string::npos;
    }));
  }
  int events_with_reason(const std::string& ns, const std::string& reason) {
    int n = 0;
    for (const Json& e : kube_.objects(event_resource(ns))) n += e["reason"] == reason;
    return n;
  }
  std::string condition(const Json& j, const std::string& type, const std::string& field) {
    for (const Json& c : j["status"]["conditions"]) {
      if (c["type"] == type) return c.value(field, "");
    }
    return "(none)";
  }
  std::vector<std::string> deleted_in_order() {
    std::vector<std::string> out;
    for (const std::string& l : logs_) {
      size_t at = l.find(" pod=");
      if (l.find("msg=\"Deleted a pod.\"") == std::string::npos || at == std::string::npos)
        continue;
      out.push_back(l.substr(at + 5, l.find(' ', at + 5) - at - 5));
    }
    return out;
  }

  HookedKubeClient kube_;
  FakeClock clock_;
  Cache cache_;
  SyncEventRecorder events_;
  Reconciler reconciler_;
  std::vector<std::string> logs_;
};

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
  EXPECT_TRUE(kube_.get(service_resource("research"), "tst-small-kjv-tst").ok()) << "kept";
  EXPECT_TRUE(kube_.get(configmap_resource("research"), "tst-small-kjv-tst-spec").ok()) << "kept";

  edit(key, {{"suspend", false}});
  kube_.reset_calls();
  reconcile(key);
  EXPECT_EQ(kube_.calls("create", "pods"), 16) << "every pod recreated on resume";
  j = job(key);
  EXPECT_EQ(j["status"]["phase"], "Pending");
  EXPECT_EQ(condition(j, "Suspended", "status"), "False");
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

TEST_F(ReconcilerTest, Reconcile_ProgressReports_StatusFollowsHighestStepTrainerFirst) {
  std::string key = add(example("rljob-cluster.yaml"));
  reconcile(key);
  set_phase("research", "qwen-math-grpo-", "Running");
  annotate("research", "qwen-math-grpo-rollout-1", R"({"step": 2, "reward": 0.1})");
  annotate("research", "qwen-math-grpo-rollout-2",
           R"({"step": 3, "reward": 0.9, "idleGPUSeconds": 7.5})");
  annotate("research", "qwen-math-grpo-trainer-0",
           R"({"step": 3, "reward": 0.5, "reclaimedGPUSeconds": 12.5, "drafterVersion": 2,
               "acceptLength": 2.25, "loss": 1.0, "time": "2025-01-02T03:04:05Z"})");
  reconcile(key);
  Json st = job(key)["status"];
  EXPECT_EQ(st["step"], 3);
  EXPECT_EQ(st["reward"], 0.5) << "a tie on step goes to the trainer";
  EXPECT_EQ(st["reclaimedGPUSeconds"], 12.5);
  EXPECT_FALSE(st.contains("idleGPUSeconds")) << "only the leading pod's report is used";
  EXPECT_EQ(st["drafter"], Json({{"version", 2}, {"acceptLength", 2.25}}));
  EXPECT_FALSE(st.contains("loss")) << "not an RLJob field";
  EXPECT_EQ(st["phase"], "Running") << "the operator's own fields as before";

  // Unchanged reports: no write. A report below the stored step: no write either.
  kube_.reset_calls();
  reconcile(key);
  annotate("research", "qwen-math-grpo-trainer-0", R"({"step": 1, "reward": 0.0})");
  annotate("research", "qwen-math-grpo-rollout-2", R"({"step": 1})");
  reconcile(key);
  EXPECT_EQ(kube_.calls("patch_status"), 0);
  EXPECT_EQ(job(key)["status"]["step"], 3) << "step never moves backwards";
  // The next step: one write.
  annotate("research", "qwen-math-grpo-trainer-0", R"({"step": 4, "reward": 0.625})");
  reconcile(key);
  EXPECT_EQ(kube_.calls("patch_status"), 1);
  st = job(key)["status"];
  EXPECT_EQ(st["step"], 4);
  EXPECT_EQ(st["reward"], 0.625);
  EXPECT_EQ(st["drafter"]["version"], 2) << "keys the report leaves out keep their values";
}

TEST_F(ReconcilerTest, Reconcile_TSTProgress_LossPhaseTokensFromRankZero) {
  std::string key = add(example("tst-cluster.yaml"));
  reconcile(key);
  annotate("research", "tst-small-kjv-workers-3", R"({"step": 40, "loss": 9.5})");
  annotate("research", "tst-small-kjv-workers-0",
           R"({"step": 40, "loss": 3.25, "evalLoss": 3.5, "trainingPhase": "superposition",
               "tokensSeen": 1310720, "reward": 1})");
  reconcile(key);
  Json st = job(key)["status"];
  EXPECT_EQ(st["step"], 40);
  EXPECT_EQ(st["loss"], 3.25) << "a tie on step goes to rank 0";
  EXPECT_EQ(st["evalLoss"], 3.5);
  EXPECT_EQ(st["trainingPhase"], "superposition");
  EXPECT_EQ(st["tokensSeen"], 1310720);
  EXPECT_FALSE(st.contains("reward"));
}

TEST_F(ReconcilerTest, Reconcile_ProgressUnreadable_OneWarningOneEventReconcileOk) {
  std::string key = add(example("tst-cluster.yaml"));
  reconcile(key);
  annotate("research", "tst-small-kjv-workers-1", R"({"step": 5, "loss": 2.0})");
  annotate("research", "tst-small-kjv-workers-2", R"({"step": "six"})");
  annotate("research", "tst-small-kjv-workers-4", "{not json");
  ReconcileResult r = reconcile(key);
  EXPECT_TRUE(r.status.ok());
  EXPECT_EQ(job(key)["status"]["step"], 5) << "the readable report is used";
  EXPECT_EQ(count_logs("level=warning"), 2);
  EXPECT_EQ(
      count_logs("level=warning msg=\"A pod's progress report is unreadable; ignoring it.\" "
                 "kind=TSTPretrainJob job=research/tst-small-kjv pod=tst-small-kjv-workers-2"),
      1);
  EXPECT_EQ(events_with_reason("research", "ProgressUnreadable"), 2);
  bool names_pod = false;
  for (const Json& e : kube_.objects(event_resource("research"))) {
    if (e["reason"] == "ProgressUnreadable" && e["type"] == "Warning")
      names_pod = names_pod ||
                  std::string(e["message"]).find("tst-small-kjv-workers-2") != std::string::npos;
  }
  EXPECT_TRUE(names_pod);
  // The same annotations again: no more warnings. A new bad value: one more.
  reconcile(key);
  EXPECT_EQ(count_logs("level=warning"), 2);
  annotate("research", "tst-small-kjv-workers-2", R"({"step": -1})");
  reconcile(key);
  EXPECT_EQ(count_logs("level=warning"), 3);
  EXPECT_EQ(events_with_reason("research", "ProgressUnreadable"), 3);
}

TEST_F(ReconcilerTest, Reconcile_FinishedJob_FinalProgressKept) {
  Json rl = example("rljob-cluster.yaml");
  std::string key = add(rl);
  reconcile(key);
  set_phase("research", "qwen-math-grpo-", "Running");
  reconcile(key);
  set_phase("research", "qwen-math-grpo-trainer-0", "Succeeded");
  annotate("research", "qwen-math-grpo-trainer-0", R"({"step": 100, "reward": 0.75})");
  reconcile(key);
  reconcile(key);  // finished: the trainer's last report still lands
  Json st = job(key)["status"];
  EXPECT_EQ(st["phase"], "Succeeded");
  EXPECT_EQ(st["step"], 100);
  EXPECT_EQ(st["reward"], 0.75);
}

TEST_F(ReconcilerTest, Reconcile_JobRecreated_StepStartsOver) {
  Json tst = example("tst-cluster.yaml");
  std::string key = add(tst);
  reconcile(key);
  annotate("research", "tst-small-kjv-workers-0", R"({"step": 50})");
  reconcile(key);
  EXPECT_EQ(job(key)["status"]["step"], 50);
  // Deleted and created again under the same name: a new uid, a new (empty) status; the old
  // pods are not its pods.
  ASSERT_TRUE(kube_.remove(job_resource("TSTPretrainJob", "research"), "tst-small-kjv").ok());
  reconcile(key);
  ASSERT_TRUE(job(key).is_null());
  key = add(tst);
  reconcile(key);
  annotate("research", "tst-small-kjv-workers-0", R"({"step": 2})");
  reconcile(key);
  EXPECT_EQ(job(key)["status"]["step"], 2);
}

TEST(Desired, PodTemplate_TltContainerMergedSidecarKept) {
  JobView job;
  job.meta.kind = "TSTPretrainJob";
  job.meta.name = "j";
  job.meta.namespace_ = "ns";
  job.meta.uid = "u1";
  RoleView role;
  role.name = "workers";
  role.replicas = 1;
  role.resources = {{"limits", {{"nvidia.com/gpu", "1"}}}};
  role.pod_template = Json::parse(R"({
    "metadata": {"labels": {"app": "x", "tlt.dev/job": "spoofed"}},
    "spec": {"serviceAccountName": "runner",
             "containers": [{"name": "tlt", "image": "mine:1",
                             "env": [{"name": "EXTRA", "value": "1"},
                                     {"name": "TLT_ROLE", "value": "spoofed"}]},
                            {"name": "sidecar", "image": "side:1"}],
             "volumes": [{"name": "data", "emptyDir": {}}]}})");
  Json pod = desired_pod(job, role, 0, PodOptions{});
  EXPECT_EQ(pod["metadata"]["labels"]["app"], "x");
  EXPECT_EQ(pod["metadata"]["labels"]["tlt.dev/job"], "j") << "the operator's labels win";
  const Json& spec = pod["spec"];
  EXPECT_EQ(spec["serviceAccountName"], "runner");
  ASSERT_EQ(spec["containers"].size(), 2u);
  EXPECT_EQ(spec["containers"][0]["image"], "mine:1") << "the template's image wins";
  EXPECT_EQ(spec["containers"][1]["name"], "sidecar");
  std::map<std::string, std::string> env;
  for (const Json& e : spec["containers"][0]["env"]) env[e["name"]] = e["value"];
  EXPECT_EQ(env["EXTRA"], "1");
  EXPECT_EQ(env["TLT_ROLE"], "workers");
  EXPECT_EQ(spec["volumes"].size(), 4u) << "data, tlt-spec, tlt-tmp, tlt-job-secret";
  EXPECT_EQ(spec["automountServiceAccountToken"], false);
  EXPECT_EQ(spec["containers"][1]["securityContext"]["allowPrivilegeEscalation"], false)
      << "sidecars restricted too";
  EXPECT_EQ(spec["restartPolicy"], "Never");
}

TEST(Desired, PodTemplate_OwnSecurityContextKeptDefaultsFillTheRest) {
  JobView job;
  job.meta.kind = "RLJob";
  job.meta.name = "j";
  job.meta.namespace_ = "ns";
  RoleView role;
  role.name = "trainer";
  role.replicas = 1;
  role.pod_template = Json::parse(R"({"spec": {
    "securityContext": {"runAsUser": 1000, "fsGroup": 1000},
    "containers": [{"name": "tlt", "securityContext": {"readOnlyRootFilesystem": false,
                                                      "capabilities": {"drop": ["NET_RAW"]}}}]}})");
  Json pod = desired_pod(job, role, 0, PodOptions{});
  const Json& psc = pod["spec"]["securityContext"];
  EXPECT_EQ(psc["runAsUser"], 1000) << "the template's choice";
  EXPECT_EQ(psc["fsGroup"], 1000);
  EXPECT_EQ(psc["runAsNonRoot"], true);
  EXPECT_EQ(psc["runAsGroup"], 65532);
  const Json& sc = pod["spec"]["containers"][0]["securityContext"];
  EXPECT_EQ(sc["readOnlyRootFilesystem"], false);
  EXPECT_EQ(sc["capabilities"], Json({{"drop", {"NET_RAW"}}}));
  EXPECT_EQ(sc["allowPrivilegeEscalation"], false);
}

TEST(Desired, PodTemplate_WrongTypes_ReadAsAbsentNeverThrow) {
  JobView job;
  job.meta.kind = "RLJob";
  job.meta.name = "j";
  job.meta.namespace_ = "ns";
  RoleView role;
  role.name = "trainer";
  role.replicas = 1;
  for (const char* tmpl :
       {R"([])", R"({"metadata": [], "spec": "x"})", R"({"metadata": {"labels": "x"}})",
        R"({"spec": {"containers": [{"name": false}, 3, {"name": "tlt", "env": "x",
             "volumeMounts": [{"name": 1}], "securityContext": []}], "volumes": [{"name": false}],
             "securityContext": 5, "initContainers": {"a": 1}}})"}) {
    SCOPED_TRACE(tmpl);
    role.pod_template = Json::parse(tmpl);
    Json pod;
    ASSERT_NO_THROW(pod = desired_pod(job, role, 0, PodOptions{}));
    EXPECT_EQ(pod["spec"]["containers"][0]["name"], "tlt");
    EXPECT_EQ(pod["metadata"]["labels"]["tlt.dev/job"], "j");
    EXPECT_FALSE(check_template_types(role.pod_template, "t").empty());
  }
}

TEST(Clock, FormatParse_RoundTrip) {
  WallTime t = std::chrono::system_clock::from_time_t(1700000000);
  EXPECT_EQ(format_time(t), "2023-11-14T22:13:20Z");
  EXPECT_EQ(parse_time("2023-11-14T22:13:20Z"), t);
  EXPECT_EQ(parse_time("2023-11-14T22:13:20.123456Z"), t);
  EXPECT_FALSE(parse_time("2023-11-14 22:13:20").has_value());
}

}  // namespace
}  // namespace tlt::controller
