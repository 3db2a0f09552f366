// The reward sources behind one interface (runtime/reward/scorer.h): built-in verifiers and a
// task's reward, the user's program on JSON lines (a child process and FIFOs) with every failure
// of its contract, and an HTTP endpoint answering well, slowly, with 500 or with garbage.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>

#include "runtime/reward/scorer.h"

namespace tlt::reward {
namespace {

namespace fs = std::filesystem;

class ScorerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tlt-scorer-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A Python program in the test's directory; its path.
  std::string script(const std::string& name, const std::string& text) {
    std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }
  api::RewardSpec command_spec(const std::string& program_text, double timeout_s = 5,
                               int retries = 1) {
    api::RewardSpec spec;
    spec.type = "command";
    spec.command = {"python3", script("reward.py", program_text)};
    spec.timeout.seconds = timeout_s;
    spec.startup_timeout.seconds = timeout_s;  // no start-up allowance beyond the timeout
    spec.retries = retries;
    return spec;
  }
  fs::path dir_;
};

ScoreRequest request(const std::string& id, const std::string& response,
                     const std::string& reference = "\"4\"") {
  return ScoreRequest{id, "What is 2 + 2?", response, reference};
}

// Scores responses "r0".. as one batch; the batch's result.
StatusOr<std::vector<double>> score_all(Scorer& s, const std::vector<std::string>& responses) {
  s.begin(responses.size());
  for (size_t i = responses.size(); i-- > 0;)  // submitted in reverse: order must not matter
    s.submit(i, request("r" + std::to_string(i), responses[i]));
  return s.wait();
}

StatusOr<std::unique_ptr<Scorer>> make(const api::RewardSpec& spec) {
  ScorerOptions o;
  o.spec = spec;
  o.dataset = true;
  return make_scorer(o);
}

void expect_error(const StatusOr<std::vector<double>>& got, const std::string& part) {
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find(part), std::string::npos) << got.status().to_string();
}

// Answers {"id", "reward": number of characters of the response}, echoing the answer field.
const char* kLengthReward = R"(
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    assert r["prompt"] == "What is 2 + 2?" and "answer" in r
    print(json.dumps({"id": r["id"], "reward": len(r["response"])}), flush=True)
)";

TEST_F(ScorerTest, VerifierAndTaskRewards) {
  api::RewardSpec spec;
  spec.type = "numeric";
  auto s = make(spec);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  auto got = score_all(**s, {"The answer is 4.", "5", "#### 4.0"});
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(*got, (std::vector<double>{1, 0, 1}));

  spec.type = "";  // a dataset: math
  auto m = make(spec);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(*score_all(**m, {"\\boxed{4}", "x"}), (std::vector<double>{1, 0}));

  ScorerOptions o;  // a generated task: its own reward
  o.task_reward = [](const ScoreRequest& r) { return r.response == "ok" ? 1.0 : 0.0; };
  auto t = make_scorer(o);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*score_all(**t, {"ok", "no"}), (std::vector<double>{1, 0}));

  spec.type = "numeric";  // a verifier's reference error names `answer`
  (*s)->begin(1);
  (*s)->submit(0, request("r0", "4", "{\"a\": 1}"));
  expect_error((*s)->wait(), "answer");
}

TEST_F(ScorerTest, UnsubmittedSlotIsAnError) {
  api::RewardSpec spec;
  spec.type = "exact";
  auto s = make(spec);
  ASSERT_TRUE(s.ok());
  (*s)->begin(2);
  (*s)->submit(0, request("a", "4"));
  expect_error((*s)->wait(), "never submitted");
}

TEST_F(ScorerTest, CommandAnswersInAnyOrderAcrossBatches) {
  // Reads the whole batch of 3, then answers in reverse.
  auto s = make(command_spec(R"(
import json, sys
batch = []
for line in sys.stdin:
    batch.append(json.loads(line))
    if len(batch) == 3:
        for r in reversed(batch):
            print(json.dumps({"id": r["id"], "reward": len(r["response"]) / 2}), flush=True)
        batch = []
)"));
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  for (int batch = 0; batch < 2; ++batch) {
    auto got = score_all(**s, {"a", "bb", "cccc"});
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_EQ(*got, (std::vector<double>{0.5, 1, 2}));
  }
}

TEST_F(ScorerTest, MissingProgramNamesTheField) {
  api::RewardSpec spec;
  spec.type = "command";
  spec.command = {"/nonexistent/reward-program"};
  auto s = make(spec);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("spec.reward.command"), std::string::npos);
  EXPECT_NE(s.status().message().find("/nonexistent/reward-program"), std::string::npos);
}

TEST_F(ScorerTest, ProgramThatExitsIsRestartedThenFails) {
  auto s = make(command_spec("import sys\nsys.stdin.readline()\nsys.exit(3)\n"));
  ASSERT_TRUE(s.ok());
  auto got = score_all(**s, {"a", "b"});
  expect_error(got, "exited with status 3");
  expect_error(got, "spec.reward.retries");
  // A failed source stays failed: the next batch fails at once, never hangs.
  expect_error(score_all(**s, {"a"}), "exited with status 3");
}

TEST_F(ScorerTest, RestartResendsWhatIsUnanswered) {
  // The first run answers one request and dies; the restarted one answers everything.
  std::string marker = (dir_ / "ran-once").string();
  auto s = make(command_spec(std::string(R"(
import json, os, sys
marker = ")") + marker + R"("
first = not os.path.exists(marker)
open(marker, "w").close()
for line in sys.stdin:
    r = json.loads(line)
    print(json.dumps({"id": r["id"], "reward": len(r["response"])}), flush=True)
    if first:
        sys.exit(1)
)"));
  ASSERT_TRUE(s.ok());
  auto got = score_all(**s, {"a", "bb", "ccc", "dddd"});
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(*got, (std::vector<double>{1, 2, 3, 4}));
}

TEST_F(ScorerTest, HangTimesOutWithinTheBound) {
  auto s = make(command_spec("import time\ntime.sleep(60)\n", 0.3, 1));
  ASSERT_TRUE(s.ok());
  auto t0 = std::chrono::steady_clock::now();
  auto got = score_all(**s, {"a"});
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  expect_error(got, "spec.reward.timeout");
  EXPECT_LT(took, 3.0);  // (retries + 1) * timeout plus the restarts
}

// A program that prints what is not an answer on stdout (a banner at import, debug prints, a
// Python dict, a JSON value without "id") runs: the lines are logged as its output, with one
// warning, and skipped.
TEST_F(ScorerTest, ChattyProgramRuns) {
  auto s = make(command_spec(R"(
import json, sys
print("Loading model weights... done")
for line in sys.stdin:
    r = json.loads(line)
    print("debug: scoring", r["id"])
    print({"id": r["id"], "len": 1})
    print(json.dumps({"step": 3}))
    print(42, flush=True)
    print(json.dumps({"id": r["id"], "reward": len(r["response"])}), flush=True)
)"));
  ASSERT_TRUE(s.ok());
  ::testing::internal::CaptureStderr();
  auto got = score_all(**s, {"a", "bb", "ccc"});
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(*got, (std::vector<double>{1, 2, 3}));
  EXPECT_NE(log.find("reward: program output: Loading model weights... done"), std::string::npos)
      << log;
  EXPECT_NE(log.find("reward: program output: debug: scoring r1"), std::string::npos) << log;
  EXPECT_NE(log.find("reward: program output: {\"step\": 3}"), std::string::npos) << log;
  EXPECT_NE(log.find("stdout is for answers"), std::string::npos) << log;
  size_t warnings = 0;
  for (size_t at = 0; (at = log.find("reward: warning:", at)) != std::string::npos; ++at)
    ++warnings;
  EXPECT_EQ(warnings, 1u) << log;
}

// A program that only chats and never answers times out, and the error shows its last line and
// what usually causes a timeout.
TEST_F(ScorerTest, ProgramThatNeverAnswersShowsItsOutput) {
  auto s = make(
      command_spec("import sys\nfor line in sys.stdin:\n    print('hello', flush=True)\n", 2, 0));
  ASSERT_TRUE(s.ok());
  ::testing::internal::CaptureStderr();
  auto got = score_all(**s, {"a"});
  ::testing::internal::GetCapturedStderr();
  expect_error(got, "spec.reward.timeout (2 s)");
  expect_error(got, "lines on stdout that were not answers: hello");
  expect_error(got, "flush=True");
}

// Python's print() buffers a pipe's output (8 KiB): without PYTHONUNBUFFERED=1, which tlt sets,
// these answers would wait in the buffer until the timeout.
TEST_F(ScorerTest, UnflushedProgramRuns) {
  auto s = make(command_spec(R"(
import json, os, sys
unbuffered = os.environ.get("PYTHONUNBUFFERED") == "1"
for line in sys.stdin:
    r = json.loads(line)
    print(json.dumps({"id": r["id"], "reward": len(r["response"]) if unbuffered else -1}))
)",
                             3, 0));
  ASSERT_TRUE(s.ok());
  for (int batch = 0; batch < 2; ++batch) {
    auto got = score_all(**s, {"a", "bb"});
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_EQ(*got, (std::vector<double>{1, 2}));
  }
}

// true and false are 1 and 0; verl's {"score": x, ...} is x (its other keys are the program's).
TEST_F(ScorerTest, BoolAndDictRewardsAreRead) {
  auto s = make(command_spec(R"(
import json, sys
answers = {"t": True, "f": False, "d": {"score": 0.25, "acc": True}, "db": {"score": True}}
for line in sys.stdin:
    r = json.loads(line)
    print(json.dumps({"id": r["id"], "reward": answers[r["response"]]}), flush=True)
)"));
  ASSERT_TRUE(s.ok());
  auto got = score_all(**s, {"t", "f", "d", "db"});
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(*got, (std::vector<double>{1, 0, 0.25, 1}));
  EXPECT_EQ(*check_reward(nlohmann::json::parse(R"({"score": -2, "pred": "x"})"), "f", "i"), -2);
  for (const char* bad : {R"({"acc": 1})", R"({"score": "1"})", R"("1")", "null"}) {
    StatusOr<double> r = check_reward(nlohmann::json::parse(bad), "spec.reward.command", "i");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("must be a number, true, false or {\"score\": number}"),
              std::string::npos)
        << r.status().message();
  }
}

// The first reward after a start may take spec.reward.startupTimeout (imports, a model loaded);
// past it, the error says so and names what usually causes it.
TEST_F(ScorerTest, StartUpGetsItsOwnAllowance) {
  const char* slow_start = R"(
import json, sys, time
time.sleep(1.5)
for line in sys.stdin:
    r = json.loads(line)
    print(json.dumps({"id": r["id"], "reward": 1}), flush=True)
)";
  api::RewardSpec spec = command_spec(slow_start, 0.5, 0);
  spec.startup_timeout.seconds = 10;
  auto s = make(spec);
  ASSERT_TRUE(s.ok());
  auto got = score_all(**s, {"a", "b"});
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(*got, (std::vector<double>{1, 1}));
  spec.startup_timeout.seconds = 0.8;
  auto short_allowance = make(spec);
  ASSERT_TRUE(short_allowance.ok());
  got = score_all(**short_allowance, {"a"});
  expect_error(got, "sent no reward since it started within spec.reward.startupTimeout (0.8 s)");
  expect_error(got, "a slow start");
}

// spec.reward.fields: the row's fields join the request (a dataset's command or http reward).
TEST_F(ScorerTest, RowFieldsReachTheProgram) {
  ScorerOptions o;
  o.spec = command_spec(R"(
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    ok = r["data_source"] == "gsm8k" and r["extra_info"] == {"split": "test"} and r["answer"] == "4"
    print(json.dumps({"id": r["id"], "reward": 1 if ok else 0}), flush=True)
)");
  o.spec.row_fields = {"data_source", "extra_info"};
  o.dataset = true;
  auto s = make_scorer(o);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  (*s)->begin(2);
  ScoreRequest with = request("r0", "4");
  with.fields_json = R"({"data_source": "gsm8k", "extra_info": {"split": "test"}})";
  ScoreRequest clash = request("r1", "4");  // a field may not replace the request's own keys
  clash.fields_json =
      R"({"data_source": "gsm8k", "extra_info": {"split": "test"}, "answer": "5", "id": "x"})";
  (*s)->submit(0, with);
  (*s)->submit(1, clash);
  auto got = (*s)->wait();
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(*got, (std::vector<double>{1, 1}));
  // Refused before any program starts: on a generated task, for a built-in verifier, a name the
  // request has already.
  ScorerOptions generated = o;
  generated.dataset = false;
  generated.task_reward = [](const ScoreRequest&) { return 0.0; };
  EXPECT_NE(make_scorer(generated).status().message().find("spec.reward.fields: only a dataset"),
            std::string::npos);
  ScorerOptions builtin = o;
  builtin.spec.type = "math";
  EXPECT_NE(make_scorer(builtin).status().message().find("spec.reward.fields: only a command or "
                                                         "http reward"),
            std::string::npos);
  ScorerOptions taken = o;
  taken.spec.row_fields = {"answer"};
  EXPECT_NE(make_scorer(taken).status().message().find("\"answer\" is a key the request has"),
            std::string::npos);
}

// An answer nested half a million levels deep (1 MB, under the line limit) is garbage, not a
// crash: walking it to print the bad reward would recurse once per level.
TEST_F(ScorerTest, DeeplyNestedAnswerFails) {
  auto s = make(command_spec(R"(
import json, sys
for line in sys.stdin:
    deep = "[" * 500000 + "]" * 500000
    print('{"id": %s, "reward": %s}' % (json.dumps(json.loads(line)["id"]), deep), flush=True)
)",
                             5, 0));
  ASSERT_TRUE(s.ok());
  auto got = score_all(**s, {"a"});
  expect_error(got, "printed a line of JSON nested deeper than 128 levels");
  expect_error(got, "spec.reward.command");
}

// A reference answer nested a million levels deep is refused naming `answer`, by the verifiers
// and by the sources that send it on.
TEST_F(ScorerTest, DeeplyNestedReferenceFails) {
  const std::string deep = std::string(1000000, '[') + std::string(1000000, ']');
  api::RewardSpec spec;
  spec.type = "math";
  auto s = make(spec);
  ASSERT_TRUE(s.ok());
  (*s)->begin(1);
  (*s)->submit(0, request("r0", "4", deep));
  expect_error((*s)->wait(), "answer: the reference of r0: JSON nested deeper than 128 levels");
  auto c = make(command_spec(kLengthReward));  // the request is refused before it is sent
  ASSERT_TRUE(c.ok());
  (*c)->begin(1);
  (*c)->submit(0, request("r1", "4", deep));
  expect_error((*c)->wait(), "answer: the reference of r1: JSON nested deeper than 128 levels");
}

// examples/rewards/verl_reward.py serves a verl-style compute_score (with its prints, a bool, a
// dict, a number) as a reward program, with data_source and extra_info from spec.reward.fields.
TEST_F(ScorerTest, VerlComputeScoreServedByTheHelper) {
  std::string user = script("my_reward.py", R"(
print("my_reward: loading")
def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    print("scoring", solution_str)
    if data_source == "bool":
        return solution_str == ground_truth
    if data_source == "dict":
        return {"score": 0.5 if solution_str == ground_truth else 0.0, "acc": True}
    return len(solution_str) + extra_info["bonus"]
)");
  ScorerOptions o;
  o.spec = command_spec("");
  o.spec.command = {"python3", std::string(TLT_SOURCE_DIR) + "/examples/rewards/verl_reward.py",
                    user};
  o.spec.row_fields = {"data_source", "extra_info"};
  o.dataset = true;
  ::testing::internal::CaptureStderr();  // before the program starts: it inherits stderr
  auto s = make_scorer(o);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  const std::vector<std::pair<std::string, std::string>> rows = {
      {"4", R"({"data_source": "bool", "extra_info": null})"},
      {"5", R"({"data_source": "bool", "extra_info": null})"},
      {"4", R"({"data_source": "dict", "extra_info": null})"},
      {"abc", R"({"data_source": "length", "extra_info": {"bonus": 2}})"}};
  (*s)->begin(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    ScoreRequest r = request("r" + std::to_string(i), rows[i].first);
    r.fields_json = rows[i].second;
    (*s)->submit(i, r);
  }
  auto got = (*s)->wait();
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(got.ok()) << got.status().to_string() << log;
  EXPECT_EQ(*got, (std::vector<double>{1, 0, 0.5, 5}));
  EXPECT_NE(log.find("my_reward: loading"), std::string::npos) << log;  // on stderr, not stdout
  EXPECT_EQ(log.find("program output"), std::string::npos) << log;
}

// A long malformed line that starts like an answer is the program's output, not a crash: the
// NaN-answer regex (std::regex recurses once per character) reads short lines only.
TEST_F(ScorerTest, LongMalformedLineIsOutput) {
  auto s = make(command_spec(R"(
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    print('{"id": "%s", "note": "%s' % (r["id"], "a" * 500000), flush=True)
    print(json.dumps({"id": r["id"], "reward": 1}), flush=True)
)",
                             5, 0));
  ASSERT_TRUE(s.ok());
  ::testing::internal::CaptureStderr();
  auto got = score_all(**s, {"a"});
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(*got, (std::vector<double>{1}));
  EXPECT_NE(log.find("reward: program output: {\"id\": \"r0\", \"note\": \"aaaa"),
            std::string::npos);
  EXPECT_LT(log.size(), 4000u);  // logged cut short
}

TEST_F(ScorerTest, OmittedIdTimesOutNamingIt) {
  auto s = make(command_spec(R"(
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    if r["id"] != "r1":
        print(json.dumps({"id": r["id"], "reward": 1}), flush=True)
)",
                             2, 0));  // long enough for Python to start on a loaded machine
  ASSERT_TRUE(s.ok());
  auto got = score_all(**s, {"a", "b", "c"});
  expect_error(got, "spec.reward.timeout");
  expect_error(got, "id \"r1\"");
}

TEST_F(ScorerTest, BadRewardValuesFailAtOnce) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"float('nan')", "NaN"},       {"float('inf')", "Infinity"}, {"'1.0'", "must be a number"},
      {"1e7", "within [-1e6, 1e6]"}, {"None", "must be a number"},
  };
  for (const auto& [value, part] : cases) {
    auto s = make(command_spec(std::string(R"(
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    print(json.dumps({"id": r["id"], "reward": )") +
                                   value + R"(}), flush=True)
)",
                               5, 3));
    ASSERT_TRUE(s.ok());
    auto got = score_all(**s, {"a"});
    expect_error(got, part);
    expect_error(got, "id \"r0\"");
    expect_error(got, "spec.reward.command");
  }
  auto s =
      make(command_spec("import json, sys\nfor line in sys.stdin:\n"
                        "    print(json.dumps({'id': json.loads(line)['id']}), flush=True)\n"));
  ASSERT_TRUE(s.ok());
  expect_error(score_all(**s, {"a"}), "has no \"reward\"");
}

TEST_F(ScorerTest, FifoModeTalksToARunningProgram) {
  std::string prog = script("sidecar.py", kLengthReward);
  std::string pipes = (dir_ / "pipes").string();
  fs::create_directories(pipes);
  ASSERT_EQ(mkfifo((pipes + "/requests").c_str(), 0600), 0);
  ASSERT_EQ(mkfifo((pipes + "/rewards").c_str(), 0600), 0);
  std::string cmd = "python3 " + prog + " < " + pipes + "/requests > " + pipes + "/rewards &";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  ScorerOptions o;
  o.spec.type = "command";
  o.spec.command = {"unused-here"};
  o.spec.timeout.seconds = 10;
  o.pipe_dir = pipes;
  auto s = make_scorer(o);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  auto got = score_all(**s, {"a", "bb", "ccc"});
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(*got, (std::vector<double>{1, 2, 3}));
}

// A sidecar whose program answers one request and exits, restarted in a loop (as a container
// runtime restarts it): each failure reopens the FIFOs and resends what is unanswered. The next
// program opens the FIFOs before tlt sees the last one's end, and the requests the dead one had
// read are lost with it: the timeout is what notices.
TEST_F(ScorerTest, FifoRetryReopensThePipes) {
  std::string prog = script("once.py", R"(
import json, sys
r = json.loads(sys.stdin.readline())
print(json.dumps({"id": r["id"], "reward": len(r["response"])}), flush=True)
)");
  std::string pipes = (dir_ / "pipes").string();
  fs::create_directories(pipes);
  ASSERT_EQ(mkfifo((pipes + "/requests").c_str(), 0600), 0);
  ASSERT_EQ(mkfifo((pipes + "/rewards").c_str(), 0600), 0);
  // timeout(1) leads its own process group: the whole loop is killed through it below.
  std::string cmd = "timeout -s KILL 120 sh -c 'for i in $(seq 30); do python3 " + prog + " < " +
                    pipes + "/requests > " + pipes + "/rewards; done' & echo $! > " +
                    (dir_ / "loop.pid").string();
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  ScorerOptions o;
  o.spec.type = "command";
  o.spec.timeout.seconds = 2;
  o.spec.startup_timeout.seconds = 2;  // a reopen is noticed by the timeout alone
  o.spec.retries = 10;  // 2 restarts needed; a reopen that races the loop may cost one more
  o.pipe_dir = pipes;
  auto s = make_scorer(o);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  auto got = score_all(**s, {"a", "bb", "ccc"});
  s->reset();
  std::string pid;
  std::ifstream(dir_ / "loop.pid") >> pid;
  if (!pid.empty()) kill(-std::stoi(pid), SIGKILL);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(*got, (std::vector<double>{1, 2, 3}));
}

TEST_F(ScorerTest, FifoWithoutProgramFailsWithinTheTimeout) {
  ScorerOptions o;
  o.spec.type = "command";
  o.spec.timeout.seconds = 0.2;
  o.pipe_dir = dir_.string();
  auto s = make_scorer(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("no program reads"), std::string::npos);
  EXPECT_NE(s.status().message().find("TLT_REWARD_PIPE_DIR"), std::string::npos);
}

// A local HTTP server (tests/reward/reward_server.py) on a free port.
class HttpScorerTest : public ScorerTest {
 protected:
  void SetUp() override {
    ScorerTest::SetUp();
    std::string port_file = (dir_ / "port").string();
    std::string cmd = std::string("python3 ") + TLT_SOURCE_DIR + "/tests/reward/reward_server.py " +
                      port_file + " & echo $! > " + (dir_ / "pid").string();
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    for (int i = 0; i < 200 && port_.empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
      std::ifstream(port_file) >> port_;
    }
    ASSERT_FALSE(port_.empty());
  }
  void TearDown() override {
    std::string pid;
    std::ifstream(dir_ / "pid") >> pid;
    if (!pid.empty()) kill(std::stoi(pid), SIGTERM);
    ScorerTest::TearDown();
  }
  StatusOr<std::unique_ptr<Scorer>> http(double timeout_s = 5, int retries = 2) {
    api::RewardSpec spec;
    spec.type = "http";
    spec.url = "http://127.0.0.1:" + port_ + "/score";
    spec.timeout.seconds = timeout_s;
    spec.retries = retries;
    spec.concurrency = 4;
    return make(spec);
  }
  std::string port_;
};

TEST_F(HttpScorerTest, GoodAndFlakyAnswers) {
  auto s = http();
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  auto got = score_all(**s, {"a", "bb", "flaky", "dddd"});
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(*got, (std::vector<double>{1, 2, 5, 4}));
}

// true and false are 1 and 0, verl's {"score": x, ...} is x, as from a command program.
TEST_F(HttpScorerTest, BoolAndDictRewardsAreRead) {
  auto s = http();
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  auto got = score_all(**s, {"true", "false", "dict", "dictbool", "abc"});
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(*got, (std::vector<double>{1, 0, 0.25, 1, 3}));
}

TEST_F(HttpScorerTest, ServerErrorIsRetriedThenFails) {
  auto s = http(5, 1);
  ASSERT_TRUE(s.ok());
  auto got = score_all(**s, {"a", "status500"});
  expect_error(got, "answered 500");
  expect_error(got, "spec.reward.url");
  expect_error(got, "spec.reward.retries");
}

TEST_F(HttpScorerTest, SlowServerTimesOut) {
  auto s = http(0.3, 1);
  ASSERT_TRUE(s.ok());
  expect_error(score_all(**s, {"slow"}), "spec.reward.timeout");
}

TEST_F(HttpScorerTest, GarbageAnswersFailAtOnce) {
  auto s = http();
  ASSERT_TRUE(s.ok());
  expect_error(score_all(**s, {"notjson"}), "not a JSON object with a \"reward\"");
  expect_error(score_all(**s, {"big"}), "must be finite");
  auto deep = score_all(**s, {"deep"});
  expect_error(deep, "the answer is JSON nested deeper than 128 levels");
  expect_error(deep, "spec.reward.url");
}

TEST_F(HttpScorerTest, RefusedConnectionFails) {
  api::RewardSpec spec;
  spec.type = "http";
  spec.url = "http://127.0.0.1:1/score";
  spec.retries = 1;
  auto s = make(spec);
  ASSERT_TRUE(s.ok());
  expect_error(score_all(**s, {"a"}), "spec.reward.url");
}

// Responses in the style of the generated arithmetic-cot task ("3 + 4 = 7. 7 * 2 = 14. Answer:
// 14"): right, wrong, unmarked, decorated, as (response, reference) pairs; seeded.
std::vector<std::pair<std::string, std::string>> arithmetic_responses(int n) {
  std::mt19937 rng(7);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const char* ends[] = {"Answer: %s",        "Answer: **%s**", "The answer is %s.",
                        "#### %s",           "so \\boxed{%s}", "%s",
                        "Answer: %s apples", "Answer: $%s$",   "Answer: %s.0",
                        "answer:%s",         "Answer: 1,%s",   "Answer: -%s"};
  std::vector<std::pair<std::string, std::string>> out;
  for (int i = 0; i < n; ++i) {
    long v = pick(-20, 99);
    std::string work;
    for (int k = pick(0, 4); k > 0; --k) {
      long x = pick(1, 12), before = v;
      char op = "+-*"[pick(0, 2)];
      v = op == '+' ? v + x : op == '-' ? v - x : v * x;
      work += std::to_string(before) + " " + op + " " + std::to_string(x) + " = " +
              std::to_string(v) + ". ";
    }
    std::string said = std::to_string(pick(0, 3) == 0 ? v + pick(-2, 2) : v);
    char end[128];
    std::snprintf(end, sizeof end, ends[pick(0, 11)], said.c_str());
    out.emplace_back(work + end, std::to_string(v));
  }
  return out;
}

using Cases = std::vector<std::pair<std::string, std::string>>;  // (response, reference JSON)

// The math-verify fixture's responses and `arithmetic` arithmetic-cot-style responses.
Cases fixture_and_arithmetic_cases(int arithmetic) {
  Cases cases;
  std::ifstream fixture(std::string(TLT_SOURCE_DIR) +
                        "/tests/reward/fixtures/math_verify_cases.jsonl");
  for (std::string line; std::getline(fixture, line);) {
    nlohmann::json c = nlohmann::json::parse(line);
    cases.emplace_back(c["response"].get<std::string>(), c["reference"].dump());
  }
  for (const auto& [response, ref] : arithmetic_responses(arithmetic))
    cases.emplace_back(response, nlohmann::json(ref).dump());
  return cases;
}

// Scores `cases` with `verifier` and with the Python program examples/rewards/`program`
// (type command); expects equal rewards case by case. Returns how many the verifier scored 1.
int expect_program_matches(Scorer* verifier, const std::string& program, const Cases& cases) {
  api::RewardSpec command;
  command.type = "command";
  command.command = {"python3", std::string(TLT_SOURCE_DIR) + "/examples/rewards/" + program};
  auto made = make(command);
  EXPECT_TRUE(made.ok()) << made.status().to_string();
  if (!made.ok()) return 0;
  std::vector<double> want, got;
  for (Scorer* s : {verifier, made->get()}) {
    s->begin(cases.size());
    for (size_t i = 0; i < cases.size(); ++i)
      s->submit(i, ScoreRequest{"c" + std::to_string(i), "", cases[i].first, cases[i].second});
    auto r = s->wait();
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    if (!r.ok()) return 0;
    (s == verifier ? want : got) = *r;
  }
  int correct = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(got[i], want[i]) << cases[i].first << " vs " << cases[i].second;
    correct += want[i] > 0;
  }
  return correct;
}

// examples/rewards/numeric_reward.py, run as a command reward, gives the built-in numeric
// verifier's rewards: on the math-verify fixture's responses with a numeric reference and on
// arithmetic-cot-style responses.
TEST_F(ScorerTest, PythonNumericRewardMatchesTheBuiltInVerifier) {
  api::RewardSpec builtin;
  builtin.type = "numeric";
  auto verifier = make(builtin);
  ASSERT_TRUE(verifier.ok());
  // The fixture's references that are not numbers are errors for both: keep the others.
  Cases numeric;
  for (const auto& c : fixture_and_arithmetic_cases(300)) {
    (*verifier)->begin(1);
    (*verifier)->submit(0, ScoreRequest{"x", "", c.first, c.second});
    if ((*verifier)->wait().ok()) numeric.push_back(c);
  }
  ASSERT_GT(numeric.size(), 400u);
  int correct = expect_program_matches(verifier->get(), "numeric_reward.py", numeric);
  std::printf("numeric_reward.py agrees with numeric on %zu responses (%d correct)\n",
              numeric.size(), correct);
}

// The short replies of examples/rljob-smollm2-short-arith.yaml: bare, marked, wordy, cut off.
std::vector<std::pair<std::string, std::string>> short_replies() {
  const char* forms[] = {"%d",
                         "%d.",
                         " %d \n",
                         "The answer is %d.",
                         "Answer: **%d**",
                         "%d + 0",
                         "=%d",
                         "\\boxed{%d}",
                         "It equals %d.",
                         "%d\n\nExplanation: the sum",
                         "THE ANSWER IS %d",
                         "%d. %d"};
  std::vector<std::pair<std::string, std::string>> out;
  std::mt19937 rng(11);
  for (int i = 0; i < 240; ++i) {
    int v = int(rng() % 40), said = rng() % 4 == 0 ? v + 1 : v;
    char text[128];
    std::snprintf(text, sizeof text, forms[i % 12], said, said);
    out.emplace_back(text, std::to_string(v));
  }
  return out;
}

TEST_F(ScorerTest, PythonExactRewardMatchesTheBuiltInVerifier) {
  Cases cases = fixture_and_arithmetic_cases(300);
  for (const auto& [response, ref] : short_replies())
    cases.emplace_back(response, nlohmann::json(ref).dump());
  api::RewardSpec builtin;
  builtin.type = "exact";
  auto verifier = make(builtin);
  ASSERT_TRUE(verifier.ok());
  int correct = expect_program_matches(verifier->get(), "exact_reward.py", cases);
  // Both verdicts occur, so agreement is not agreement on a constant.
  EXPECT_GT(correct, 100);
  EXPECT_LT(correct, int(cases.size()) - 100);
  std::printf("exact_reward.py agrees with exact on %zu responses (%d correct)\n", cases.size(),
              correct);
}

}  // namespace
}  // namespace tlt::reward
