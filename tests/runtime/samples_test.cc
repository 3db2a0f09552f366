// An RL run's samples.jsonl (runtime/rl/samples.h): which responses one in N records, what a row
// holds (the rendered prompt, the response as the reward read it, the answer as JSON, the row's
// fields, lengths, the finish reason), a resumed run's file, no file at 0, a damaged line named
// by read_samples, and the report's failed-run summary (runtime/report/job_report.h).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "runtime/report/job_report.h"
#include "runtime/rl/samples.h"
#include "runtime/rl/scoring.h"

namespace tlt::rl {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

class SamplesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tlt-samples-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Step `step`'s batch: 2 problems x 3 responses. Response j is "r<step><j>" plus, by j % 3, the
  // end id (eos), nothing at the length cap of 4 ids (length) or nothing short of it (context).
  void record(SampleLog& log, int64_t step) {
    std::vector<Problem> problems(2);
    problems[0].prompt = "1+1=", problems[0].answer = "2";
    problems[1].prompt = "2+3=", problems[1].id = "train.jsonl:7";
    problems[1].reference_json = R"({"value": 5})", problems[1].fields_json = R"({"src": "x"})";
    std::vector<std::vector<int64_t>> prompts, responses;
    std::vector<double> rewards;
    for (int64_t j = 0; j < 6; ++j) {
      prompts.push_back(encode_text(problems[size_t(j / 3)].prompt));
      std::vector<int64_t> r = encode_text("r" + std::to_string(step) + std::to_string(j));
      if (j % 3 == 0) r.push_back(kEndOfText);
      if (j % 3 == 1) r.push_back('!');  // 4 ids: the cap
      responses.push_back(r);
      rewards.push_back(0.5 * double(j) + double(step));
    }
    log.record(step, "train", problems, prompts, responses, rewards,
               [step](int64_t j) { return step_request_id(step, j); });
  }
  std::string path() const { return (dir_ / "report" / kSamplesFile).string(); }
  SampleLog open(int64_t every, int64_t kept_through = -1) {
    return SampleLog(path(), every, &ascii_codec(), /*max_response_tokens=*/4, kept_through,
                     [this](const std::string& m) { warnings_.push_back(m); });
  }
  std::vector<std::string> ids() const {
    StatusOr<std::vector<SampleRow>> rows = read_samples(path());
    EXPECT_TRUE(rows.ok()) << rows.status().to_string();
    std::vector<std::string> out;
    if (rows.ok())
      for (const SampleRow& r : *rows) out.push_back(r.id);
    return out;
  }

  fs::path dir_;
  std::vector<std::string> warnings_;
};

TEST_F(SamplesTest, OneInNCountedOverTheRun) {
  SampleLog log = open(4);
  record(log, 1);
  record(log, 2);
  // Responses 0..11 of the run: 0, 4 and 8 (step 2's third).
  EXPECT_EQ(ids(), (std::vector<std::string>{"s1-0", "s1-4", "s2-2"}));
  EXPECT_TRUE(warnings_.empty());
}

TEST_F(SamplesTest, RowHoldsWhatTheRewardRead) {
  SampleLog log = open(1);
  record(log, 3);
  StatusOr<std::vector<SampleRow>> rows = read_samples(path());
  ASSERT_TRUE(rows.ok()) << rows.status().to_string();
  ASSERT_EQ(rows->size(), 6u);
  const SampleRow& first = (*rows)[0];
  EXPECT_EQ(first.step, 3);
  EXPECT_EQ(first.phase, "train");
  EXPECT_EQ(first.prompt, "1+1=");
  EXPECT_EQ(first.response, "r30") << "the end id is not text";
  EXPECT_EQ(first.answer, json("2")) << "a generated problem's answer, as the reward got it";
  EXPECT_TRUE(first.fields.is_null());
  EXPECT_TRUE(first.problem.empty());
  EXPECT_EQ(first.tokens, 4);
  EXPECT_EQ(first.prompt_tokens, 4);
  EXPECT_EQ(first.finish, "eos");
  EXPECT_EQ((*rows)[1].finish, "length");
  EXPECT_EQ((*rows)[2].finish, "context");
  const SampleRow& row = (*rows)[4];
  EXPECT_EQ(row.id, "s3-4");
  EXPECT_EQ(row.problem, "train.jsonl:7");
  EXPECT_EQ(row.answer, json::parse(R"({"value": 5})"));
  EXPECT_EQ(row.fields, json::parse(R"({"src": "x"})"));
  EXPECT_DOUBLE_EQ(row.reward, 5.0);
  for (size_t j = 0; j < rows->size(); ++j) {  // the ids and prompts of the run's requests
    EXPECT_EQ((*rows)[j].id, step_request_id(3, int64_t(j)));
    EXPECT_EQ((*rows)[j].prompt, j < 3 ? "1+1=" : "2+3=");
  }
}

TEST_F(SamplesTest, ResumedRunKeepsItsCheckpointsStepsAndAppends) {
  {
    SampleLog log = open(2);
    record(log, 1);
    record(log, 2);
  }
  EXPECT_EQ(ids(), (std::vector<std::string>{"s1-0", "s1-2", "s1-4", "s2-0", "s2-2", "s2-4"}));
  {
    SampleLog log = open(2, /*kept_through=*/1);  // resumed after step 1: step 2 runs again
    record(log, 2);
  }
  EXPECT_EQ(ids(), (std::vector<std::string>{"s1-0", "s1-2", "s1-4", "s2-0", "s2-2", "s2-4"}));
  {
    SampleLog log = open(2);  // a fresh run empties the file
    record(log, 1);
  }
  EXPECT_EQ(ids(), (std::vector<std::string>{"s1-0", "s1-2", "s1-4"}));
}

TEST_F(SamplesTest, ZeroRecordsNothing) {
  SampleLog log = open(0);
  record(log, 1);
  EXPECT_FALSE(fs::exists(path()));
  EXPECT_TRUE(warnings_.empty());
}

TEST_F(SamplesTest, UnwritablePathWarnsOnceAndTheRunGoesOn) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / "report") << "a file where the directory should be";
  SampleLog log = open(1);
  record(log, 1);
  record(log, 2);
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("spec.report.samples"), std::string::npos) << warnings_[0];
}

TEST_F(SamplesTest, DamagedLineIsNamed) {
  fs::create_directories(dir_ / "report");
  std::ofstream(path()) << R"({"step": 1, "phase": "train", "id": "s1-0", "prompt": "p",)"
                        << R"( "response": "r", "reward": 1, "tokens": 2})" << "\n"
                        << R"({"step": 1, "phase": "train", "id": "s1-1"})" << "\n";
  StatusOr<std::vector<SampleRow>> rows = read_samples(path());
  ASSERT_FALSE(rows.ok());
  EXPECT_NE(rows.status().message().find(path() + ":2"), std::string::npos)
      << rows.status().to_string();
  EXPECT_NE(rows.status().message().find("\"prompt\""), std::string::npos)
      << rows.status().to_string();
}

TEST_F(SamplesTest, FailedRunReportKeepsItsStepsAndError) {
  report::JobReport rep(dir_ / "report", "job", "RLJob");
  RLRunResult done;
  done.steps.resize(2);
  done.steps[0].step = 1, done.steps[0].reward_mean = 0.25;
  done.steps[1].step = 2, done.steps[1].reward_mean = 0.5;
  rep.add_failed_rl_run("tlt", done, "step 3 rewards: spec.reward.command: exited");
  rep.write_summary();
  std::ifstream in(rep.summary_path());
  json summary = json::parse(in);
  EXPECT_EQ(summary["failed"], "tlt run: step 3 rewards: spec.reward.command: exited");
  EXPECT_EQ(summary["tlt"]["stepsCompleted"], 2);
  EXPECT_EQ(summary["tlt"]["stepRewards"], json::parse("[0.25, 0.5]"));
  std::ifstream run_in(dir_ / "report" / "tlt.json");
  json run = json::parse(run_in);
  EXPECT_EQ(run["steps"].size(), 2u);
  EXPECT_EQ(run["failed"], "step 3 rewards: spec.reward.command: exited");
  EXPECT_EQ(rep.samples_path("tlt"), dir_ / "report" / "samples.jsonl");
  EXPECT_EQ(rep.samples_path("baseline"), dir_ / "report" / "samples-baseline.jsonl");
}

}  // namespace
}  // namespace tlt::rl
