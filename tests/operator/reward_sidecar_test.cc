// The reward on a cluster (operator/controller/reward_sidecar.h) against the fakes: the shape of
// the trainer pods' reward sidecar (image, command on the FIFOs, env with PYTHONUNBUFFERED=1
// unless the job sets it, resources, the operator's restricted securityContext whatever the
// template says, the shared volume and the trainer's TLT_REWARD_PIPE_DIR), no sidecar for a
// command without a container or for other roles, the URL allow-list's rule, and the reconciler
// refusing an http reward URL the admin does not allow (Failed naming spec.reward.url, no pods)
// or a reward container with no command.
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "api/encode.h"
#include "api/manifest.h"
#include "kube/fake_client.h"
#include "operator/controller/reconciler.h"
#include "operator/controller/reward_sidecar.h"

namespace tlt::controller {
namespace {

using Json = nlohmann::json;

// examples/rljob-cluster.yaml as the apiserver stores it (defaults filled in), with
// spec.reward = `reward`.
Json cluster_job(const Json& reward) {
  std::ifstream in(std::string(TLT_SOURCE_DIR) + "/examples/rljob-cluster.yaml");
  std::stringstream text;
  text << in.rdbuf();
  StatusOr<api::Job> job = api::parse_job_yaml(text.str());
  EXPECT_TRUE(job.ok()) << job.status().to_string();
  Json j = std::visit([](const auto& x) { return api::to_json(x); }, job.value());
  j.erase("status");
  j["spec"]["reward"] = reward;
  j["metadata"]["uid"] = "uid-1";
  return j;
}

Json container_reward() {
  return {{"type", "command"},
          {"container",
           {{"image", "registry.example/reward:1"},
            {"command", {"python3", "/app/reward.py"}},
            {"env", {{"MODE", "strict"}}},
            {"resources", {{"limits", {{"cpu", "1"}, {"memory", "1Gi"}}}}}}}};
}

JobView view(const Json& object) {
  StatusOr<JobView> v = decode_job("RLJob", object);
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

TEST(RewardSidecar, ContainerReward_TrainerPodCarriesSidecarVolumeAndEnv) {
  JobView job = view(cluster_job(container_reward()));
  Json spec = desired_pod(job, role(job, "trainer"), 0, PodOptions{})["spec"];
  const Json* side = named(spec["initContainers"], "reward");
  ASSERT_NE(side, nullptr) << spec.dump(2);
  EXPECT_EQ((*side)["image"], "registry.example/reward:1");
  EXPECT_EQ((*side)["restartPolicy"], "Always") << "a native sidecar: ends with the trainer";
  const Json& cmd = (*side)["command"];
  ASSERT_EQ(cmd.size(), 6u) << cmd.dump();
  EXPECT_EQ(cmd[0], "/bin/sh");
  EXPECT_EQ(cmd[1], "-c");
  std::string script = cmd[2];
  EXPECT_NE(script.find("exec \"$@\" < \"$d/requests\" > \"$d/rewards\""), std::string::npos)
      << script;
  EXPECT_NE(script.find(std::string("d=") + kRewardPipeDir), std::string::npos) << script;
  EXPECT_EQ(cmd[3], "reward") << "$0 of the script";
  EXPECT_EQ(cmd[4], "python3");
  EXPECT_EQ(cmd[5], "/app/reward.py");
  EXPECT_EQ((*side)["env"], Json::parse(R"([{"name": "MODE", "value": "strict"},
                                              {"name": "PYTHONUNBUFFERED", "value": "1"}])"))
      << "a Python program's answers reach the FIFO without a flush";
  EXPECT_EQ((*side)["resources"], Json::parse(R"({"limits": {"cpu": "1", "memory": "1Gi"}})"));
  EXPECT_EQ((*side)["securityContext"],
            Json::parse(R"({"runAsNonRoot": true, "allowPrivilegeEscalation": false,
                            "capabilities": {"drop": ["ALL"]},
                            "seccompProfile": {"type": "RuntimeDefault"}})"));
  EXPECT_EQ((*side)["volumeMounts"],
            Json::parse(R"([{"name": "tlt-reward", "mountPath": "/var/run/tlt-reward"}])"));
  const Json* volume = named(spec["volumes"], kRewardVolume);
  ASSERT_NE(volume, nullptr);
  EXPECT_EQ((*volume)["emptyDir"], Json::object());
  const Json* tlt = named(spec["containers"], kContainerName);
  ASSERT_NE(tlt, nullptr);
  const Json* env = named((*tlt)["env"], kRewardPipeEnv);
  ASSERT_NE(env, nullptr);
  EXPECT_EQ((*env)["value"], kRewardPipeDir);
  const Json* mount = named((*tlt)["volumeMounts"], kRewardVolume);
  ASSERT_NE(mount, nullptr);
  EXPECT_EQ((*mount)["mountPath"], kRewardPipeDir);
  EXPECT_EQ(spec["containers"].size(), 1u) << "the sidecar is no regular container";
}

TEST(RewardSidecar, JobSetsPythonUnbuffered_ItsValueStands) {
  Json reward = container_reward();
  reward["container"]["env"] = {{"PYTHONUNBUFFERED", "0"}};
  JobView job = view(cluster_job(reward));
  Json spec = desired_pod(job, role(job, "trainer"), 0, PodOptions{})["spec"];
  const Json* side = named(spec["initContainers"], "reward");
  ASSERT_NE(side, nullptr) << spec.dump(2);
  EXPECT_EQ((*side)["env"], Json::parse(R"([{"name": "PYTHONUNBUFFERED", "value": "0"}])"));
  reward["container"].erase("env");
  job = view(cluster_job(reward));
  spec = desired_pod(job, role(job, "trainer"), 0, PodOptions{})["spec"];
  side = named(spec["initContainers"], "reward");
  ASSERT_NE(side, nullptr) << spec.dump(2);
  EXPECT_EQ((*side)["env"], Json::parse(R"([{"name": "PYTHONUNBUFFERED", "value": "1"}])"));
}

TEST(RewardSidecar, OtherRolesAndCommandWithoutContainer_NoSidecar) {
  JobView job = view(cluster_job(container_reward()));
  for (const char* r : {"rollout", "drafter"}) {
    Json spec = desired_pod(job, role(job, r), 0, PodOptions{})["spec"];
    EXPECT_FALSE(spec.contains("initContainers")) << r;
    EXPECT_EQ(named(spec["volumes"], kRewardVolume), nullptr) << r;
  }
  // No container: the command runs in the trainer container itself.
  JobView local = view(cluster_job({{"type", "command"}, {"command", {"python3", "r.py"}}}));
  Json spec = desired_pod(local, role(local, "trainer"), 0, PodOptions{})["spec"];
  EXPECT_FALSE(spec.contains("initContainers"));
  EXPECT_EQ(named(spec["containers"][0]["env"], kRewardPipeEnv), nullptr);
  EXPECT_EQ(named(spec["volumes"], kRewardVolume), nullptr);
}

TEST(RewardSidecar, NoContainerCommand_SpecRewardCommandRuns) {
  Json reward = container_reward();
  reward["container"].erase("command");
  reward["command"] = {"python3", "score.py", "--strict"};
  JobView job = view(cluster_job(reward));
  Json spec = desired_pod(job, role(job, "trainer"), 0, PodOptions{})["spec"];
  const Json* side = named(spec["initContainers"], "reward");
  ASSERT_NE(side, nullptr);
  const Json& cmd = (*side)["command"];
  ASSERT_EQ(cmd.size(), 7u) << cmd.dump();
  EXPECT_EQ(Json(std::vector<Json>(cmd.begin() + 3, cmd.end())),
            Json::parse(R"(["reward", "python3", "score.py", "--strict"])"));
}

TEST(RewardSidecar, TemplateReusesTheName_OperatorsSecurityContextWins) {
  Json object = cluster_job(container_reward());
  object["spec"]["roles"]["trainer"]["podTemplate"] = Json::parse(R"({"spec": {
      "securityContext": {"runAsUser": 1000},
      "initContainers": [
        {"name": "fetch", "image": "busybox:1"},
        {"name": "reward", "image": "evil:1",
         "securityContext": {"allowPrivilegeEscalation": true, "runAsNonRoot": false}}]}})");
  JobView job = view(object);
  Json spec = desired_pod(job, role(job, "trainer"), 0, PodOptions{})["spec"];
  ASSERT_EQ(spec["initContainers"].size(), 2u) << spec["initContainers"].dump();
  EXPECT_EQ(spec["initContainers"][0]["name"], "fetch") << "the template's own kept";
  const Json* side = named(spec["initContainers"], "reward");
  ASSERT_NE(side, nullptr);
  EXPECT_EQ((*side)["image"], "registry.example/reward:1");
  EXPECT_EQ((*side)["securityContext"]["allowPrivilegeEscalation"], false);
  EXPECT_EQ((*side)["securityContext"]["runAsNonRoot"], true);
  EXPECT_EQ(spec["securityContext"]["runAsUser"], 1000) << "the pod's user, shared with tlt";
}

TEST(RewardSidecar, UrlAllowed_EntryOrBelowItOnly) {
  std::vector<std::string> allowed = {"http://reward.scoring:8000/", "", "https://rm.example/v1"};
  for (const char* url : {"http://reward.scoring:8000", "http://reward.scoring:8000/score",
                          "https://rm.example/v1", "https://rm.example/v1/score?x=1"}) {
    EXPECT_TRUE(reward_url_allowed(url, allowed)) << url;
  }
  for (const char* url : {"http://reward.scoring:80001", "http://reward.scoring:8000@evil.example/",
                          "http://reward.scoring", "https://rm.example/v10", "https://rm.example/",
                          "", "http://evil.example/http://reward.scoring:8000"}) {
    EXPECT_FALSE(reward_url_allowed(url, allowed)) << url;
  }
  EXPECT_FALSE(reward_url_allowed("http://anything", {}));
  EXPECT_FALSE(reward_url_allowed("http://anything", {"", "/"}));
}

// The reconciler with an allow-list, over the fake apiserver.
class RewardReconcileTest : public ::testing::Test {
 protected:
  RewardReconcileTest()
      : clock_(std::chrono::system_clock::from_time_t(1700000000)),
        events_(&kube_, &clock_, "tlt-operator") {}

  ReconcileResult reconcile(const Json& object, const std::vector<std::string>& allowed) {
    kube_.put(job_resource("RLJob", "research"), object);
    std::vector<kube::Resource> all = owned_resources("");
    all.push_back(job_resource("RLJob", ""));
    for (const kube::Resource& r : all) {
      StatusOr<kube::ObjectList> list = kube_.list(r, kube::ListOptions{});
      EXPECT_TRUE(list.ok()) << list.status().to_string();
      if (list.ok()) cache_.store(r.plural)->replace(list->items, list->resource_version);
    }
    ReconcilerOptions options;
    options.pod.reward_url_allow = allowed;
    Reconciler reconciler(&kube_, &cache_, &events_, &clock_, options);
    std::string name = object["metadata"]["name"];
    return reconciler.reconcile(job_key("RLJob", "research", name));
  }
  Json stored(const std::string& name) {
    StatusOr<Json> j = kube_.get(job_resource("RLJob", "research"), name);
    return j.ok() ? *j : Json();
  }
  std::string failed(const Json& j, const char* field) {
    for (const Json& c : j["status"].value("conditions", Json::array())) {
      if (c["type"] == "Failed") return c.value(field, "");
    }
    return "(none)";
  }
  int pods() { return static_cast<int>(kube_.objects(pod_resource("research")).size()); }

  kube::FakeKubeClient kube_;
  FakeClock clock_;
  Cache cache_;
  SyncEventRecorder events_;
};

TEST_F(RewardReconcileTest, HttpUrlNotAllowed_FailedNamingFieldNoPodsThenAllowedRuns) {
  Json object = cluster_job({{"type", "http"}, {"url", "http://evil.example:9000/score"}});
  ReconcileResult r = reconcile(object, {"http://reward.scoring:8000"});
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(r.phase, "Failed");
  EXPECT_FALSE(r.requeue_after.has_value()) << "no retry: the spec or the allow-list must change";
  Json j = stored("qwen-math-grpo");
  EXPECT_EQ(failed(j, "reason"), kRewardURLNotAllowed);
  std::string message = failed(j, "message");
  for (const char* needle :
       {"spec.reward.url", "http://evil.example:9000/score", "--reward-url-allow"}) {
    EXPECT_NE(message.find(needle), std::string::npos) << message;
  }
  EXPECT_EQ(pods(), 0);
  EXPECT_EQ(kube_.calls("create", "pods") + kube_.calls("create", "services"), 0);
  // The admin allows it: the same job runs.
  r = reconcile(stored("qwen-math-grpo"), {"http://evil.example:9000"});
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(r.phase, "Pending");
  EXPECT_EQ(pods(), 9) << "8 rollout, 1 trainer";
}

TEST_F(RewardReconcileTest, ContainerWithoutCommand_InvalidSpecNamingField) {
  Json reward = container_reward();
  reward["container"].erase("command");
  ReconcileResult r = reconcile(cluster_job(reward), {});
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(r.phase, "Failed");
  Json j = stored("qwen-math-grpo");
  EXPECT_EQ(failed(j, "reason"), kInvalidSpec);
  EXPECT_NE(failed(j, "message").find("spec.reward.container.command"), std::string::npos)
      << failed(j, "message");
  EXPECT_EQ(pods(), 0);
}

TEST_F(RewardReconcileTest, ContainerReward_TrainerPodCreatedWithSidecar) {
  ReconcileResult r = reconcile(cluster_job(container_reward()), {});
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  StatusOr<Json> pod = kube_.get(pod_resource("research"), "qwen-math-grpo-trainer-0");
  ASSERT_TRUE(pod.ok()) << pod.status().to_string();
  EXPECT_NE(named((*pod)["spec"]["initContainers"], "reward"), nullptr);
  StatusOr<Json> rollout = kube_.get(pod_resource("research"), "qwen-math-grpo-rollout-0");
  ASSERT_TRUE(rollout.ok());
  EXPECT_FALSE((*rollout)["spec"].contains("initContainers"));
}

}  // namespace
}  // namespace tlt::controller
