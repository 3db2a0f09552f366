// parse_progress (the tlt.dev/progress contract), the choice of the leading report, and how a
// report folds into a job's status.
#include <gtest/gtest.h>

#include "operator/controller/progress.h"

namespace tlt::controller {
namespace {

using Json = nlohmann::json;

TEST(Progress, Parse_EveryKey) {
  StatusOr<Progress> p = parse_progress(R"({"step": 12, "reward": 0.25, "loss": 2.5,
      "evalLoss": 2.75, "trainingPhase": "recovery", "tokensSeen": 123456789012,
      "reclaimedGPUSeconds": 30.5, "idleGPUSeconds": 4, "drafterVersion": 3,
      "acceptLength": 2.5, "time": "2025-01-02T03:04:05Z"})");
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->step, 12);
  EXPECT_EQ(p->reward, 0.25);
  EXPECT_EQ(p->loss, 2.5);
  EXPECT_EQ(p->eval_loss, 2.75);
  EXPECT_EQ(p->training_phase, "recovery");
  EXPECT_EQ(p->tokens_seen, 123456789012);
  EXPECT_EQ(p->reclaimed_gpu_seconds, 30.5);
  EXPECT_EQ(p->idle_gpu_seconds, 4.0);
  EXPECT_EQ(p->drafter_version, 3);
  EXPECT_EQ(p->accept_length, 2.5);
  EXPECT_EQ(p->time, "2025-01-02T03:04:05Z");
}

TEST(Progress, Parse_KeysOptionalNullAbsentUnknownIgnored) {
  StatusOr<Progress> p = parse_progress(R"({"step": 3, "reward": null, "future": [1, 2]})");
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->step, 3);
  EXPECT_FALSE(p->reward.has_value()) << "null is what a JSON writer makes of NaN";
  EXPECT_FALSE(p->loss.has_value());
  EXPECT_TRUE(parse_progress("{}").ok());
  StatusOr<Progress> whole = parse_progress(R"({"step": 7.0, "reward": -1.5})");
  ASSERT_TRUE(whole.ok()) << whole.status().to_string();
  EXPECT_EQ(whole->step, 7) << "an integral float is an integer";
  EXPECT_EQ(whole->reward, -1.5) << "rewards may be negative";
}

TEST(Progress, Parse_Malformed_InvalidArgumentNamingTheKey) {
  const std::pair<const char*, const char*> cases[] = {
      {"{\"step\": 3", "not JSON"},
      {"[1, 2]", "JSON object"},
      {"\"step\"", "JSON object"},
      {R"({"step": "3"})", "step: want an integer"},
      {R"({"step": -1})", "step: want an integer"},
      {R"({"step": 2.5})", "step: want an integer"},
      {R"({"step": 2147483648})", "step: want an integer from 0 to 2147483647"},
      {R"({"reward": "high"})", "reward: want a number"},
      {R"({"trainingPhase": "warmup"})", "trainingPhase: want superposition, recovery or baseline"},
      {R"({"trainingPhase": 1})", "trainingPhase: want a string"},
      {R"({"tokensSeen": -5})", "tokensSeen: want an integer"},
      {R"({"idleGPUSeconds": -0.5})", "idleGPUSeconds: want a number >= 0"},
      {R"({"acceptLength": true})", "acceptLength: want a number >= 0"},
      {R"({"time": 17})", "time: want a string"},
  };
  for (const auto& [text, want] : cases) {
    StatusOr<Progress> p = parse_progress(text);
    ASSERT_FALSE(p.ok()) << text;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument) << text;
    EXPECT_NE(p.status().message().find(want), std::string::npos)
        << text << " -> " << p.status().message();
  }
}

PodProgress report(const std::string& pod, const std::string& role, int index,
                   std::optional<int64_t> step) {
  PodProgress r{pod, role, index, {}};
  r.progress.step = step;
  return r;
}

TEST(Progress, Leading_HighestStepThenLeadRoleThenLowestIndex) {
  std::vector<PodProgress> reports{report("j-rollout-1", "rollout", 1, 5),
                                   report("j-rollout-0", "rollout", 0, 7),
                                   report("j-trainer-0", "trainer", 0, 6)};
  EXPECT_EQ(leading_progress(reports, "trainer")->pod, "j-rollout-0") << "the highest step";
  reports.push_back(report("j-trainer-0b", "trainer", 0, 7));
  EXPECT_EQ(leading_progress(reports, "trainer")->pod, "j-trainer-0b") << "tie: the lead role";
  std::vector<PodProgress> workers{report("t-workers-3", "workers", 3, 9),
                                   report("t-workers-0", "workers", 0, 9),
                                   report("t-workers-1", "workers", 1, std::nullopt)};
  EXPECT_EQ(leading_progress(workers, "workers")->pod, "t-workers-0") << "tie: rank 0";
  std::vector<PodProgress> no_step{report("t-workers-2", "workers", 2, std::nullopt),
                                   report("t-workers-1", "workers", 1, std::nullopt)};
  EXPECT_EQ(leading_progress(no_step, "workers")->pod, "t-workers-1");
  EXPECT_EQ(leading_progress({}, "workers"), nullptr);
}

TEST(Progress, Status_RLKeysOverStoredNeverBackwards) {
  Json stored = {{"phase", "Running"},
                 {"step", 4},
                 {"reward", 0.1},
                 {"drafter", {{"version", 2}, {"acceptLength", 1.5}}}};
  Progress p;
  p.step = 5;
  p.reward = 0.5;
  p.accept_length = 2.0;
  p.loss = 9.0;  // a TST key: not an RLJob field
  Json s = progress_status("RLJob", stored, &p);
  EXPECT_EQ(
      s,
      Json({{"step", 5}, {"reward", 0.5}, {"drafter", {{"version", 2}, {"acceptLength", 2.0}}}}));
  p.step = 3;
  p.reward = 0.9;
  EXPECT_EQ(progress_status("RLJob", stored, &p),
            Json({{"step", 4}, {"reward", 0.1}, {"drafter", stored["drafter"]}}))
      << "a report below the stored step changes nothing";
  EXPECT_EQ(progress_status("RLJob", stored, nullptr)["step"], 4) << "no report: kept";
  EXPECT_EQ(progress_status("RLJob", Json::object(), nullptr), Json::object());
}

TEST(Progress, Status_TSTKeys) {
  Progress p;
  p.step = 100;
  p.loss = 3.25;
  p.eval_loss = 3.5;
  p.training_phase = "superposition";
  p.tokens_seen = 819200;
  p.reward = 1.0;  // an RL key: not a TSTPretrainJob field
  Json s = progress_status("TSTPretrainJob", {{"phase", "Running"}}, &p);
  EXPECT_EQ(s, Json({{"step", 100},
                     {"loss", 3.25},
                     {"evalLoss", 3.5},
                     {"trainingPhase", "superposition"},
                     {"tokensSeen", 819200}}));
}

}  // namespace
}  // namespace tlt::controller
