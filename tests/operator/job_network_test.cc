// The job's network surface (operator/controller/job_network.h) against the fakes: the desired
// pods carry the job's Secret and (trainer 0 only) a projected apiserver token in the "tlt"
// container and nowhere else, with automountServiceAccountToken false; the Secret's shape; the
// NetworkPolicy's selectors and ports; the podTemplate checks that keep sidecars away from the
// credentials; and the reconciler: a Secret created once and never rotated, a squatted Secret
// name failing the job, the NetworkPolicy created, applied and removed when turned off, and
// both deleted with the job.
#include <openssl/evp.h>

#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "api/encode.h"
#include "api/manifest.h"
#include "kube/fake_client.h"
#include "operator/controller/job_network.h"
#include "operator/controller/log.h"
#include "operator/controller/reconciler.h"

namespace tlt::controller {
namespace {

using Json = nlohmann::json;

// An example manifest as the apiserver stores it (defaults filled in), uid uid-1.
Json example(const std::string& file) {
  std::ifstream in(std::string(TLT_SOURCE_DIR) + "/examples/" + file);
  std::stringstream text;
  text << in.rdbuf();
  StatusOr<api::Job> job = api::parse_job_yaml(text.str());
  EXPECT_TRUE(job.ok()) << job.status().to_string();
  Json j = std::visit([](const auto& x) { return api::to_json(x); }, job.value());
  j.erase("status");
  j["metadata"]["uid"] = "uid-1";
  return j;
}

// The RL example with a reward sidecar and, on the trainer, a sidecar and an init container of
// the job author's.
Json rl_with_sidecars() {
  Json j = example("rljob-cluster.yaml");
  j["spec"]["reward"] = {
      {"type", "command"},
      {"container", {{"image", "reward:1"}, {"command", {"python3", "/app/reward.py"}}}}};
  j["spec"]["roles"]["trainer"]["podTemplate"] = {
      {"spec",
       {{"containers", {{{"name", "logs"}, {"image", "busybox:1"}}}},
        {"initContainers", {{{"name", "fetch"}, {"image", "busybox:1"}}}}}}};
  return j;
}

JobView view(const Json& object) {
  StatusOr<JobView> v = decode_job(object["kind"], object);
  EXPECT_TRUE(v.ok()) << v.status().to_string();
  return v.ok() ? *v : JobView{};
}

const RoleView& role(const JobView& job, const std::string& name) {
  for (const RoleView& r : job.roles) {
    if (r.name == name) return r;
  }
  ADD_FAILURE() << "no role " << name;
  return job.roles.front();
}

const Json* named(const Json& list, const std::string& name) {
  if (!list.is_array()) return nullptr;
  for (const Json& e : list) {
    if (e.value("name", "") == name) return &e;
  }
  return nullptr;
}

std::string base64_decode(const std::string& text) {
  std::string out(text.size(), '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(text.data()),
                          static_cast<int>(text.size()));
  EXPECT_GE(n, 0) << text;
  out.resize(static_cast<size_t>(std::max(n, 0)));
  while (!out.empty() && out.back() == '\0') out.pop_back();  // the padding's zero bytes
  return out;
}

bool lower_hex(const std::string& s) {
  return s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// Every container of `spec` (containers and initContainers) by name.
std::map<std::string, Json> all_containers(const Json& spec) {
  std::map<std::string, Json> out;
  for (const char* list : {"containers", "initContainers"}) {
    for (const Json& c : spec.value(list, Json::array())) out[c["name"]] = c;
  }
  return out;
}

TEST(JobNetwork, TrainerPod_SecretAndTokenInTltOnlyNoAutomount) {
  JobView job = view(rl_with_sidecars());
  Json spec = desired_pod(job, role(job, "trainer"), 0, PodOptions{})["spec"];
  EXPECT_EQ(spec["automountServiceAccountToken"], false)
      << "no container gets the ServiceAccount token by admission";
  const Json* secret = named(spec["volumes"], "tlt-job-secret");
  ASSERT_NE(secret, nullptr) << spec["volumes"].dump();
  EXPECT_EQ((*secret)["secret"],
            Json({{"secretName", "qwen-math-grpo-rl-secret"}, {"defaultMode", 0444}}));
  const Json* token = named(spec["volumes"], "tlt-token");
  ASSERT_NE(token, nullptr) << "trainer 0's runtime uses the apiserver";
  const Json& sources = (*token)["projected"]["sources"];
  ASSERT_EQ(sources.size(), 3u) << sources.dump();
  EXPECT_EQ(sources[0]["serviceAccountToken"],
            Json({{"path", "token"}, {"expirationSeconds", 3607}}));
  EXPECT_EQ(sources[1]["configMap"]["name"], "kube-root-ca.crt");
  EXPECT_EQ(sources[1]["configMap"]["items"][0], Json({{"key", "ca.crt"}, {"path", "ca.crt"}}));
  EXPECT_EQ(sources[2]["downwardAPI"]["items"][0]["fieldRef"]["fieldPath"], "metadata.namespace");
  EXPECT_EQ(sources[2]["downwardAPI"]["items"][0]["path"], "namespace");

  std::map<std::string, Json> containers = all_containers(spec);
  ASSERT_EQ(containers.size(), 4u) << "tlt, logs, fetch and reward: " << spec.dump();
  for (const auto& [name, c] : containers) {
    const Json mounts = c.value("volumeMounts", Json::array());
    const Json* secret_mount = named(mounts, "tlt-job-secret");
    const Json* token_mount = named(mounts, "tlt-token");
    const Json env_list = c.value("env", Json::array());
    const Json* env = named(env_list, "TLT_JOB_SECRET_FILE");
    if (name != "tlt") {
      EXPECT_EQ(secret_mount, nullptr) << name << " must not see the job's secret";
      EXPECT_EQ(token_mount, nullptr) << name << " must not get the apiserver token";
      EXPECT_EQ(env, nullptr) << name;
      continue;
    }
    ASSERT_NE(secret_mount, nullptr);
    EXPECT_EQ(*secret_mount, Json({{"name", "tlt-job-secret"},
                                   {"mountPath", "/var/run/secrets/tlt.dev/job"},
                                   {"readOnly", true}}));
    ASSERT_NE(token_mount, nullptr);
    EXPECT_EQ(*token_mount, Json({{"name", "tlt-token"},
                                  {"mountPath", "/var/run/secrets/kubernetes.io/serviceaccount"},
                                  {"readOnly", true}}));
    ASSERT_NE(env, nullptr);
    EXPECT_EQ((*env)["value"], "/var/run/secrets/tlt.dev/job/secret");
  }
  // The whole pod still meets the restricted Pod Security Standard (projected volumes are
  // allowed) and the admin rules.
  EXPECT_TRUE(check_pod_security_lines(PodPolicy{}, role(job, "trainer").pod_template,
                                       desired_pod(job, role(job, "trainer"), 0, PodOptions{}),
                                       "spec.roles.trainer.podTemplate")
                  .empty());
}

TEST(JobNetwork, RolloutAndTSTPods_SecretButNoToken) {
  JobView rl = view(example("rljob-cluster.yaml"));
  Json rollout = desired_pod(rl, role(rl, "rollout"), 0, PodOptions{})["spec"];
  EXPECT_EQ(rollout["automountServiceAccountToken"], false);
  EXPECT_EQ(named(rollout["volumes"], "tlt-token"), nullptr) << "its runtime never calls out";
  ASSERT_NE(named(rollout["volumes"], "tlt-job-secret"), nullptr);
  EXPECT_NE(named(rollout["containers"][0]["volumeMounts"], "tlt-job-secret"), nullptr);

  JobView tst = view(example("tst-cluster.yaml"));
  for (int i : {0, 1}) {
    Json spec = desired_pod(tst, role(tst, "workers"), i, PodOptions{})["spec"];
    EXPECT_EQ(spec["automountServiceAccountToken"], false);
    EXPECT_EQ(named(spec["volumes"], "tlt-token"), nullptr);
    const Json* secret = named(spec["volumes"], "tlt-job-secret");
    ASSERT_NE(secret, nullptr);
    EXPECT_EQ((*secret)["secret"]["secretName"], "tst-small-kjv-tst-secret");
    EXPECT_NE(named(spec["containers"][0]["env"], "TLT_JOB_SECRET_FILE"), nullptr);
  }
}

TEST(JobNetwork, TemplateSetsAutomount_KeptAndNoProjectedToken) {
  Json j = example("rljob-cluster.yaml");
  j["spec"]["roles"]["trainer"]["podTemplate"] = {
      {"spec", {{"automountServiceAccountToken", true}}}};
  JobView job = view(j);
  Json spec = desired_pod(job, role(job, "trainer"), 0, PodOptions{})["spec"];
  EXPECT_EQ(spec["automountServiceAccountToken"], true) << "the admin allowed it (pod policy)";
  EXPECT_EQ(named(spec["volumes"], "tlt-token"), nullptr)
      << "two token mounts at one path would be refused";
}

TEST(JobNetwork, Secret_ImmutableOwnedHexUnderKeySecret) {
  JobView job = view(example("rljob-cluster.yaml"));
  const std::string hex(64, 'a');
  Json s = desired_job_secret(job, hex);
  EXPECT_EQ(s["kind"], "Secret");
  EXPECT_EQ(s["metadata"]["name"], "qwen-math-grpo-rl-secret");
  EXPECT_EQ(s["metadata"]["namespace"], "research");
  EXPECT_EQ(s["immutable"], true) << "nobody rewrites it under running pods";
  EXPECT_TRUE(owned_by(s, "uid-1"));
  EXPECT_EQ(s["metadata"]["labels"]["tlt.dev/job"], "qwen-math-grpo");
  EXPECT_EQ(s["metadata"]["labels"]["app.kubernetes.io/managed-by"], "tlt-operator");
  ASSERT_EQ(s["data"].size(), 1u);
  EXPECT_EQ(base64_decode(s["data"]["secret"]), hex);
}

TEST(JobNetwork, NetworkPolicy_JobPodsFromJobPodsMetricsFromConfiguredNamespaces) {
  JobView job = view(example("rljob-cluster.yaml"));
  Json np = desired_network_policy(job, NetworkPolicyOptions{});
  EXPECT_EQ(np["apiVersion"], "networking.k8s.io/v1");
  EXPECT_EQ(np["metadata"]["name"], "qwen-math-grpo-rl");
  EXPECT_TRUE(owned_by(np, "uid-1"));
  const Json job_pods = {{"tlt.dev/job", "qwen-math-grpo"}, {"tlt.dev/kind", "RLJob"}};
  const Json& spec = np["spec"];
  EXPECT_EQ(spec["podSelector"], Json({{"matchLabels", job_pods}}));
  EXPECT_EQ(spec["policyTypes"], Json({"Ingress"})) << "ingress is what the finding is about";
  ASSERT_EQ(spec["ingress"].size(), 2u) << spec.dump();
  EXPECT_EQ(spec["ingress"][0], Json({{"from", {{{"podSelector", {{"matchLabels", job_pods}}}}}}}))
      << "the job's own pods, on every port (rendezvous, weight-sync, the Gloo pairs)";
  EXPECT_EQ(spec["ingress"][1], Json({{"from", {{{"namespaceSelector", Json::object()}}}},
                                      {"ports", {{{"protocol", "TCP"}, {"port", 9400}}}}}))
      << "the metrics port (spec.metrics.port) from every namespace by default";

  NetworkPolicyOptions monitoring;
  ASSERT_TRUE(monitoring.add_metrics_from("kubernetes.io/metadata.name=monitoring").ok());
  np = desired_network_policy(job, monitoring);
  EXPECT_EQ(np["spec"]["ingress"][1]["from"][0]["namespaceSelector"],
            Json({{"matchLabels", {{"kubernetes.io/metadata.name", "monitoring"}}}}));

  Json j = example("tst-cluster.yaml");
  j["spec"]["metrics"]["port"] = 0;  // off: nothing to scrape
  JobView tst = view(j);
  np = desired_network_policy(tst, NetworkPolicyOptions{});
  EXPECT_EQ(np["metadata"]["name"], "tst-small-kjv-tst");
  ASSERT_EQ(np["spec"]["ingress"].size(), 1u) << np.dump();
  EXPECT_EQ(np["spec"]["podSelector"]["matchLabels"]["tlt.dev/kind"], "TSTPretrainJob");
}

TEST(JobNetwork, MetricsFrom_BadTermsRefusedNamingTheFlag) {
  NetworkPolicyOptions o;
  for (const std::string& bad : std::vector<std::string>{"monitoring", "=x", "a b=c", "k=v w",
                                                         "-k=v", "k=" + std::string(64, 'v')}) {
    Status s = o.add_metrics_from(bad);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("--network-policy-metrics-from"), std::string::npos) << s.message();
  }
  EXPECT_TRUE(o.add_metrics_from("team=obs").ok());
  EXPECT_TRUE(o.add_metrics_from("example.com/tier=").ok());
  EXPECT_EQ(o.add_metrics_from("team=other").code(), StatusCode::kInvalidArgument)
      << "one value per key";
  EXPECT_EQ(o.metrics_from,
            (std::map<std::string, std::string>{{"example.com/tier", ""}, {"team", "obs"}}));
}

TEST(JobNetwork, Template_SidecarReachingForCredentialsRefusedNamingEachField) {
  const std::string at = "spec.roles.trainer.podTemplate";
  Json t = Json::parse(R"({"spec": {
    "containers": [
      {"name": "tlt", "volumeMounts": [{"name": "tlt-job-secret", "mountPath": "/also"}]},
      {"name": "side", "volumeMounts": [{"name": "tlt-job-secret", "mountPath": "/s"},
                                        {"name": "data", "mountPath": "/d"}],
       "env": [{"name": "K", "valueFrom": {"secretKeyRef": {"name": "other-rl-secret",
                                                            "key": "secret"}}},
               {"name": "DB", "valueFrom": {"secretKeyRef": {"name": "db", "key": "pw"}}}],
       "envFrom": [{"secretRef": {"name": "x-tst-secret"}}]}],
    "initContainers": [{"name": "init", "volumeMounts": [{"name": "tlt-token",
                                                          "mountPath": "/t"}]}],
    "shareProcessNamespace": true,
    "volumes": [{"name": "a", "secret": {"secretName": "victim-rl-secret"}},
                {"name": "b", "projected": {"sources": [{"secret": {"name": "v-tst-secret"}}]}},
                {"name": "c", "secret": {"secretName": "my-tls"}}]}})");
  std::vector<std::string> lines = check_job_credentials(t, at);
  std::set<std::string> fields;
  for (const std::string& l : lines) fields.insert(l.substr(0, l.find(':')));
  EXPECT_EQ(fields,
            (std::set<std::string>{at + ".spec.containers[1].volumeMounts[0].name",
                                   at + ".spec.containers[1].env[0].valueFrom.secretKeyRef.name",
                                   at + ".spec.containers[1].envFrom[0].secretRef.name",
                                   at + ".spec.initContainers[0].volumeMounts[0].name",
                                   at + ".spec.volumes[0].secret.secretName",
                                   at + ".spec.volumes[1].projected.sources[0].secret.name",
                                   at + ".spec.shareProcessNamespace"}))
      << "the tlt container's own mount, the db secret and my-tls are fine";
  for (const std::string& l : lines) {
    EXPECT_TRUE(l.find("remove this mount") != std::string::npos ||
                l.find("name another Secret") != std::string::npos ||
                l.find("leave it out") != std::string::npos)
        << "each line says the fix: " << l;
  }
  EXPECT_TRUE(
      check_job_credentials(Json::parse(R"({"spec": {"volumes": [{"name": 1}]}})"), at).empty())
      << "wrong types are pod_template.h's to refuse";
}

// ---- the reconciler -------------------------------------------------------------------------

class JobNetworkReconcileTest : public ::testing::Test {
 protected:
  JobNetworkReconcileTest()
      : clock_(std::chrono::system_clock::from_time_t(1700000000)),
        events_(&kube_, &clock_, "tlt-operator") {
    set_log_sink([this](const std::string& line) { logs_.push_back(line); });
  }
  ~JobNetworkReconcileTest() override { set_log_sink(nullptr); }

  std::string add(Json job) {
    job["metadata"].erase("uid");  // the fake apiserver gives one
    std::string kind = job["kind"], ns = job["metadata"]["namespace"],
                name = job["metadata"]["name"];
    kube_.put(job_resource(kind, ns), job);
    return job_key(kind, ns, name);
  }
  void sync() {
    std::vector<kube::Resource> all = {job_resource("RLJob", ""),
                                       job_resource("TSTPretrainJob", "")};
    for (const kube::Resource& r : owned_resources("")) all.push_back(r);
    for (const kube::Resource& r : all) {
      kube::ListOptions lo;
      if (r.group != api::kGroup) lo.label_selector = owned_selector();
      StatusOr<kube::ObjectList> list = kube_.list(r, lo);
      ASSERT_TRUE(list.ok()) << list.status().to_string();
      cache_.store(r.plural)->replace(list->items, list->resource_version);
    }
  }
  ReconcileResult reconcile(const std::string& key, const ReconcilerOptions& options = {}) {
    sync();
    Reconciler reconciler(&kube_, &cache_, &events_, &clock_, options);
    return reconciler.reconcile(key);
  }
  Json get(const kube::Resource& r, const std::string& name) {
    StatusOr<Json> o = kube_.get(r, name);
    return o.ok() ? *o : Json();
  }
  std::string uid(const std::string& kind, const std::string& name) {
    return get(job_resource(kind, "research"), name)["metadata"].value("uid", "");
  }

  kube::FakeKubeClient kube_;
  FakeClock clock_;
  Cache cache_;
  SyncEventRecorder events_;
  std::vector<std::string> logs_;
};

TEST_F(JobNetworkReconcileTest, Reconcile_RLJob_SecretCreatedOnceNeverRotated) {
  std::string key = add(example("rljob-cluster.yaml"));
  ASSERT_TRUE(reconcile(key).status.ok());
  Json secret = get(secret_resource("research"), "qwen-math-grpo-rl-secret");
  ASSERT_TRUE(secret.is_object()) << "the job has its Secret";
  EXPECT_TRUE(owned_by(secret, uid("RLJob", "qwen-math-grpo")));
  const std::string value = base64_decode(secret["data"]["secret"]);
  EXPECT_EQ(value.size(), 64u);
  EXPECT_TRUE(lower_hex(value)) << value;
  EXPECT_EQ(value.find(std::string(16, value[0])), std::string::npos) << "random, not constant";

  kube_.reset_calls();
  for (int pass = 0; pass < 3; ++pass) ASSERT_TRUE(reconcile(key).status.ok());
  EXPECT_EQ(kube_.calls("create", "secrets") + kube_.calls("apply", "secrets") +
                kube_.calls("patch", "secrets"),
            0)
      << "a Secret the job owns is never written again";
  EXPECT_EQ(get(secret_resource("research"), "qwen-math-grpo-rl-secret")["data"], secret["data"]);

  // A cache that has not seen the Secret yet (a lagging watch): the create finds the job's
  // own, and its value stays.
  cache_.store("secrets")->replace({}, "999999");
  Reconciler stale(&kube_, &cache_, &events_, &clock_, ReconcilerOptions{});
  ASSERT_TRUE(stale.reconcile(key).status.ok());
  EXPECT_EQ(get(secret_resource("research"), "qwen-math-grpo-rl-secret")["data"], secret["data"]);

  // Another job gets a secret of its own.
  std::string tst = add(example("tst-cluster.yaml"));
  ASSERT_TRUE(reconcile(tst).status.ok());
  Json other = get(secret_resource("research"), "tst-small-kjv-tst-secret");
  ASSERT_TRUE(other.is_object());
  EXPECT_NE(base64_decode(other["data"]["secret"]), value);
}

TEST_F(JobNetworkReconcileTest, Reconcile_SecretNameTaken_FailedNoPodsSecretUntouched) {
  Json squatter = {{"apiVersion", "v1"},
                   {"kind", "Secret"},
                   {"metadata", {{"name", "qwen-math-grpo-rl-secret"}, {"namespace", "research"}}},
                   {"data", {{"secret", "YWJj"}}}};
  kube_.put(secret_resource("research"), squatter);
  std::string key = add(example("rljob-cluster.yaml"));
  ReconcileResult r = reconcile(key);
  EXPECT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(r.phase, "Failed");
  Json j = get(job_resource("RLJob", "research"), "qwen-math-grpo");
  std::string reason, message;
  for (const Json& c : j["status"]["conditions"]) {
    if (c["type"] == "Failed") reason = c.value("reason", ""), message = c.value("message", "");
  }
  EXPECT_EQ(reason, "JobSecretNotOwned");
  EXPECT_NE(message.find("Secret qwen-math-grpo-rl-secret already exists and is not owned"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("delete or rename that Secret"), std::string::npos) << message;
  EXPECT_TRUE(kube_.objects(pod_resource("research")).empty()) << "no pod trusts it";
  Json kept = get(secret_resource("research"), "qwen-math-grpo-rl-secret");
  EXPECT_EQ(kept["data"], squatter["data"]) << "never adopted or overwritten";
  EXPECT_FALSE(kept["metadata"].contains("ownerReferences"));
}

TEST_F(JobNetworkReconcileTest, Reconcile_NetworkPolicyFollowsSpecAndFlagDeletedWithJob) {
  std::string key = add(example("rljob-cluster.yaml"));
  ASSERT_TRUE(reconcile(key).status.ok());
  Json np = get(networkpolicy_resource("research"), "qwen-math-grpo-rl");
  ASSERT_TRUE(np.is_object()) << "the job has its NetworkPolicy";
  EXPECT_TRUE(owned_by(np, uid("RLJob", "qwen-math-grpo")));
  EXPECT_EQ(np["spec"]["ingress"][1]["ports"][0]["port"], 9400);

  // The spec's metrics port changes: the policy follows; an unchanged one is not rewritten.
  Json j = get(job_resource("RLJob", "research"), "qwen-math-grpo");
  j["spec"]["metrics"]["port"] = 9500;
  kube_.put(job_resource("RLJob", "research"), j);
  ASSERT_TRUE(reconcile(key).status.ok());
  np = get(networkpolicy_resource("research"), "qwen-math-grpo-rl");
  EXPECT_EQ(np["spec"]["ingress"][1]["ports"][0]["port"], 9500);
  kube_.reset_calls();
  ASSERT_TRUE(reconcile(key).status.ok());
  EXPECT_EQ(kube_.calls("apply", "networkpolicies"), 0);

  // Turned off: the job's NetworkPolicy goes.
  ReconcilerOptions off;
  off.pod.network_policy.enabled = false;
  ASSERT_TRUE(reconcile(key, off).status.ok());
  EXPECT_FALSE(get(networkpolicy_resource("research"), "qwen-math-grpo-rl").is_object());
  ASSERT_TRUE(reconcile(key).status.ok());
  ASSERT_TRUE(get(networkpolicy_resource("research"), "qwen-math-grpo-rl").is_object());

  // The job is deleted: the finalizer removes the Secret and the NetworkPolicy too.
  ASSERT_TRUE(kube_.remove(job_resource("RLJob", "research"), "qwen-math-grpo").ok());
  for (int pass = 0; pass < 2; ++pass) ASSERT_TRUE(reconcile(key).status.ok());
  EXPECT_FALSE(get(networkpolicy_resource("research"), "qwen-math-grpo-rl").is_object());
  EXPECT_FALSE(get(secret_resource("research"), "qwen-math-grpo-rl-secret").is_object());
  EXPECT_FALSE(get(job_resource("RLJob", "research"), "qwen-math-grpo").is_object())
      << "the finalizer was dropped";
}

TEST_F(JobNetworkReconcileTest, Reconcile_SidecarMountsJobSecret_ForbiddenByPodPolicy) {
  Json j = example("rljob-cluster.yaml");
  j["spec"]["roles"]["trainer"]["podTemplate"] = {
      {"spec",
       {{"containers",
         {{{"name", "side"},
           {"image", "busybox:1"},
           {"volumeMounts", {{{"name", "tlt-job-secret"}, {"mountPath", "/s"}}}}}}}}}};
  std::string key = add(j);
  ReconcileResult r = reconcile(key);
  EXPECT_EQ(r.phase, "Failed");
  Json stored = get(job_resource("RLJob", "research"), "qwen-math-grpo");
  std::string reason, message;
  for (const Json& c : stored["status"]["conditions"]) {
    if (c["type"] == "Failed") reason = c.value("reason", ""), message = c.value("message", "");
  }
  EXPECT_EQ(reason, "ForbiddenByPodPolicy");
  const std::string field = "spec.roles.trainer.podTemplate.spec.containers[0].volumeMounts[0]";
  EXPECT_NE(message.find(field + ".name: \"tlt-job-secret\""), std::string::npos) << message;
  EXPECT_TRUE(kube_.objects(pod_resource("research")).empty());
}

}  // namespace
}  // namespace tlt::controller
