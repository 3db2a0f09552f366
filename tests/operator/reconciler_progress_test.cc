// The reconciler's status from the pods' progress reports (reconciler_fixture.h), and the pod
// template's merge (desired.h) and the status clock's time format.

#include "tests/operator/reconciler_fixture.h"

namespace tlt::controller {
namespace {

using namespace test;

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
