// runtime/rl/dataset_task: the held-out split, the per-epoch shuffle a resumed run continues,
// prompts (strings and message lists), longPrompts, rewards, and the errors naming spec fields.
#include "runtime/rl/dataset_task.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <set>

namespace tlt::rl {
namespace {
namespace fs = std::filesystem;

const std::string kDir = std::string(TLT_SOURCE_DIR) + "/tests/dataset/";
constexpr uint64_t kRlOffset = uint64_t(1) << 32;  // the RL stream's first index (rollout_phase)

api::DatasetSpec spec_of(const std::string& path, int held_out = 3) {
  api::DatasetSpec s;
  s.path = path, s.held_out = held_out;
  return s;
}

std::unique_ptr<DatasetTask> open_ok(const api::DatasetSpec& spec, uint64_t seed = 1,
                                     const api::RewardSpec& reward = {}) {
  StatusOr<std::unique_ptr<DatasetTask>> t = DatasetTask::open(spec, reward, seed);
  EXPECT_TRUE(t.ok()) << t.status().message();
  return t.ok() ? std::move(*t) : nullptr;
}

std::string open_error(const api::DatasetSpec& spec, const api::RewardSpec& reward = {}) {
  StatusOr<std::unique_ptr<DatasetTask>> t = DatasetTask::open(spec, reward, 1);
  return t.ok() ? std::string("(opened)") : t.status().message();
}

std::string write(const std::string& name, const std::string& text) {
  std::string p =
      (fs::temp_directory_path() / ("tlt-dstask-" + std::to_string(::getpid()) + "-" + name))
          .string();
  std::ofstream(p, std::ios::binary) << text;
  return p;
}

// Records the turns it is asked to render.
class RecordingCodec : public AsciiCodec {
 public:
  StatusOr<std::vector<int64_t>> encode_messages(
      const std::vector<ChatTurn>& turns) const override {
    last = turns;
    return AsciiCodec::encode_messages(turns);
  }
  mutable std::vector<ChatTurn> last;
};

TEST(DatasetTask, HeldOutSplitIsSeededAndDisjoint) {
  std::unique_ptr<DatasetTask> t = open_ok(spec_of(kDir + "arith.jsonl", 3));
  ASSERT_TRUE(t);
  ASSERT_TRUE(t->fit(ascii_codec(), 1000).ok());
  EXPECT_EQ(t->train_rows(), 9);
  EXPECT_EQ(t->held_out_rows(), 3);
  std::set<std::string> held, train;
  for (uint64_t i = 0; i < 3; ++i) held.insert(t->problem(i, true).id);
  for (uint64_t j = 0; j < 9; ++j) train.insert(t->problem(kRlOffset + j, false).id);
  EXPECT_EQ(held.size(), 3u);
  EXPECT_EQ(train.size(), 9u);  // one epoch visits every training row once
  for (const std::string& id : held) EXPECT_EQ(train.count(id), 0u) << id;
  // The same seed splits the same way; the split follows the seed.
  std::unique_ptr<DatasetTask> again = open_ok(spec_of(kDir + "arith.jsonl", 3));
  for (uint64_t i = 0; i < 3; ++i) EXPECT_EQ(again->problem(i, true).id, t->problem(i, true).id);
  bool differs = false;
  for (uint64_t seed = 2; seed < 6 && !differs; ++seed) {
    std::unique_ptr<DatasetTask> other = open_ok(spec_of(kDir + "arith.jsonl", 3), seed);
    std::set<std::string> h;
    for (uint64_t i = 0; i < 3; ++i) h.insert(other->problem(i, true).id);
    differs = h != held;
  }
  EXPECT_TRUE(differs);
}

TEST(DatasetTask, ShufflePerEpochAndResumedOrder) {
  std::unique_ptr<DatasetTask> t = open_ok(spec_of(kDir + "arith.jsonl", 2), 7);
  ASSERT_TRUE(t->fit(ascii_codec(), 1000).ok());
  const uint64_t n = 10;
  std::vector<std::string> epoch0, epoch1;
  for (uint64_t j = 0; j < n; ++j) epoch0.push_back(t->problem(kRlOffset + j, false).id);
  for (uint64_t j = n; j < 2 * n; ++j) epoch1.push_back(t->problem(kRlOffset + j, false).id);
  EXPECT_EQ(std::set<std::string>(epoch0.begin(), epoch0.end()),
            std::set<std::string>(epoch1.begin(), epoch1.end()));
  EXPECT_NE(epoch0, epoch1);  // each epoch has its own order
  std::vector<std::string> file_order;
  for (uint64_t r = 0; r < 12; ++r)
    file_order.push_back(kDir + "arith.jsonl:" + std::to_string(r + 1));
  EXPECT_NE(std::vector<std::string>(epoch0.begin(), epoch0.end()),
            std::vector<std::string>(file_order.begin(), file_order.begin() + 10));
  // A resumed run (a new process: a new task) at step 4 of 3 prompts a step reads positions
  // 9..11 and meets what the first run met there, across the epoch boundary.
  std::unique_ptr<DatasetTask> resumed = open_ok(spec_of(kDir + "arith.jsonl", 2), 7);
  ASSERT_TRUE(resumed->fit(ascii_codec(), 1000).ok());
  for (uint64_t j = 9; j < 12; ++j)
    EXPECT_EQ(resumed->problem(kRlOffset + j, false).id, t->problem(kRlOffset + j, false).id);
  EXPECT_EQ(resumed->problem(kRlOffset + 9, false).id, epoch0[9]);
  EXPECT_EQ(resumed->problem(kRlOffset + 10, false).id, epoch1[0]);
  // fitting_problem's redraw (i + 2^40) reads the next position.
  EXPECT_EQ(t->problem(kRlOffset + 3 + (uint64_t(1) << 40), false).id, epoch0[4]);
}

TEST(DatasetTask, StringPromptsAndTheMathReward) {
  std::unique_ptr<DatasetTask> t = open_ok(spec_of(kDir + "arith.jsonl", 0 + 1));
  ASSERT_TRUE(t->fit(ascii_codec(), 1000).ok());
  Problem p = t->problem(kRlOffset, false);
  ASSERT_FALSE(p.prompt.empty());
  EXPECT_TRUE(p.messages_json.empty());
  EXPECT_EQ(p.reference_json, "\"" + p.answer + "\"");
  EXPECT_EQ(t->reward(p, "so the answer is \\boxed{" + p.answer + "}"), 1.0);
  EXPECT_EQ(t->reward(p, "The answer is " + p.answer + "1"), 0.0);
  EXPECT_EQ(t->reward(p, ""), 0.0);
  StatusOr<std::vector<int64_t>> ids = t->encode(ascii_codec(), p);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, encode_text(p.prompt));
}

TEST(DatasetTask, ParquetMessagesAndNestedAnswer) {
  api::DatasetSpec s = spec_of(kDir + "verl.parquet", 2);
  s.answer_field = "reward_model.ground_truth";
  std::unique_ptr<DatasetTask> t = open_ok(s);
  ASSERT_TRUE(t);
  ASSERT_TRUE(t->fit(ascii_codec(), 1000).ok());
  EXPECT_EQ(t->train_rows(), 6);
  Problem p = t->problem(0, true);
  ASSERT_FALSE(p.messages_json.empty());
  RecordingCodec codec;
  StatusOr<std::vector<int64_t>> ids = t->encode(codec, p);
  ASSERT_TRUE(ids.ok()) << ids.status().message();
  ASSERT_EQ(codec.last.size(), 2u);
  EXPECT_EQ(codec.last[0].role, "system");
  EXPECT_EQ(codec.last[0].content, "Answer with a number.");
  EXPECT_EQ(codec.last[1].role, "user");
  // The ASCII codec (no chat template) reads the contents joined.
  EXPECT_EQ(*ids, encode_text("Answer with a number.\n" + codec.last[1].content));
  EXPECT_EQ(t->reward(p, "#### " + p.answer), 1.0);
}

TEST(DatasetTask, ShardsAndHeldOutPath) {
  api::DatasetSpec s = spec_of(kDir + "arith.jsonl", 3);
  s.held_out_path = kDir + "shards";
  std::unique_ptr<DatasetTask> t = open_ok(s);
  ASSERT_TRUE(t->fit(ascii_codec(), 1000).ok());
  EXPECT_EQ(t->train_rows(), 12);
  EXPECT_EQ(t->held_out_rows(), 9);
  EXPECT_EQ(t->problem(4, true).id, kDir + "shards/part-001.jsonl:2");
  EXPECT_EQ(t->problem(13, true).id, t->problem(4, true).id);  // wraps
}

TEST(DatasetTask, MissingFieldsNameTheField) {
  api::DatasetSpec s = spec_of(kDir + "arith.jsonl");
  s.answer_field = "solution";
  std::string e = open_error(s);
  EXPECT_NE(e.find("spec.task.dataset.path: " + kDir +
                   "arith.jsonl:1: spec.task.dataset.answerField: the row has no field "
                   "\"solution\" (its fields: answer, extra, prompt)"),
            std::string::npos)
      << e;
  s = spec_of(kDir + "arith.jsonl");
  s.prompt_field = "extra.question";
  e = open_error(s);
  EXPECT_NE(e.find("spec.task.dataset.promptField: the row has no field \"extra.question\""),
            std::string::npos)
      << e;
  e = open_error(spec_of(kDir + "wrong_schema.parquet"));
  EXPECT_NE(e.find("wrong_schema.parquet: row 1: spec.task.dataset.promptField: the row has no "
                   "field \"prompt\" (its fields: question, solution)"),
            std::string::npos)
      << e;
}

TEST(DatasetTask, PromptOfTheWrongShape) {
  std::string p =
      write("shape.jsonl", "{\"prompt\": \"ok\", \"answer\": 1}\n{\"prompt\": 5, \"answer\": 1}\n");
  std::string e = open_error(spec_of(p, 0));
  EXPECT_NE(e.find(p + ":2: spec.task.dataset.promptField: \"prompt\" is a number; a prompt is a "
                       "string or a list of chat messages"),
            std::string::npos)
      << e;
  p = write("msgs.jsonl", "{\"prompt\": [{\"role\": \"user\"}], \"answer\": 1}\n");
  e = open_error(spec_of(p, 0));
  EXPECT_NE(e.find(p + ":1: spec.task.dataset.promptField: \"prompt\" message 0 is not"),
            std::string::npos)
      << e;
  p = write("nullanswer.jsonl", "{\"prompt\": \"q\", \"answer\": null}\n");
  e = open_error(spec_of(p, 0));
  EXPECT_NE(e.find(p + ":1: spec.task.dataset.answerField: \"answer\": "), std::string::npos) << e;
}

// Every row is hashed (dumped) as it is read: a row nested a million levels deep must be refused
// before that, naming the field, the file and the line.
TEST(DatasetTask, DeeplyNestedRowIsRefusedNotACrash) {
  std::string deep = "{\"prompt\": \"1 + 1\", \"answer\": " + std::string(1000000, '[') +
                     std::string(1000000, ']') + "}";
  std::string p = write("deep.jsonl", "{\"prompt\": \"1 + 1\", \"answer\": \"2\"}\n" + deep + "\n");
  std::string e = open_error(spec_of(p, 1));
  EXPECT_EQ(e.rfind("spec.task.dataset.path: " + p + ":2: JSON nested deeper than 128 levels", 0),
            0u)
      << e.substr(0, 300);
}

// A dataset path that is a FIFO is refused at once, naming the field, before anything blocks on
// it (an open() of a FIFO waits for a writer).
TEST(DatasetTask, FifoPathRefusedNamingTheField) {
  std::string p =
      (fs::temp_directory_path() / ("tlt-dstask-" + std::to_string(::getpid()) + "-pipe.jsonl"))
          .string();
  fs::remove(p);
  ASSERT_EQ(::mkfifo(p.c_str(), 0600), 0);
  auto opened = std::async(std::launch::async, [p] { return open_error(spec_of(p, 1)); });
  bool ready = opened.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  if (!ready) ::close(::open(p.c_str(), O_WRONLY | O_NONBLOCK));  // lets a blocked open go
  std::string e = opened.get();
  fs::remove(p);
  ASSERT_TRUE(ready) << "DatasetTask::open blocked on a FIFO";
  EXPECT_EQ(
      e.rfind("spec.task.dataset.path: " + p + ": is a FIFO (named pipe), not a regular file", 0),
      0u)
      << e;
  api::DatasetSpec held = spec_of(kDir + "arith.jsonl", 0);
  held.held_out_path = "/dev/null";
  e = open_error(held);
  EXPECT_EQ(e.rfind("spec.task.dataset.heldOutPath: /dev/null: is a character device", 0), 0u) << e;
}

TEST(DatasetTask, EmptyDatasetAndTooManyHeldOut) {
  std::string p = write("empty.jsonl", "\n \n");
  std::string e = open_error(spec_of(p, 0));
  EXPECT_EQ(e, "spec.task.dataset.path: " + p + " holds no rows");
  e = open_error(spec_of(kDir + "arith.jsonl", 12));
  EXPECT_NE(e.find("spec.task.dataset.heldOut: 12 rows held out of the 12 rows of"),
            std::string::npos)
      << e;
  EXPECT_NE(open_error(spec_of(kDir + "nope.jsonl")).find("spec.task.dataset.path: "),
            std::string::npos);
}

TEST(DatasetTask, RewardSpecs) {
  api::RewardSpec bad;
  bad.type = "regex";  // without a pattern
  EXPECT_NE(open_error(spec_of(kDir + "arith.jsonl"), bad).find("pattern"), std::string::npos);
  api::RewardSpec cmd;
  cmd.type = "command";  // scored outside the task
  std::unique_ptr<DatasetTask> t = open_ok(spec_of(kDir + "arith.jsonl"), 1, cmd);
  ASSERT_TRUE(t->fit(ascii_codec(), 1000).ok());
  Problem p = t->problem(0, false);
  EXPECT_EQ(t->reward(p, "The answer is " + p.answer), 0.0);
}

// spec.reward.fields: each named field of the row (a dotted path; null where the row lacks it), or
// the whole row under "row", carried by the problem for a command or http reward's request.
TEST(DatasetTask, RewardFieldsTravelWithTheProblem) {
  api::RewardSpec cmd;
  cmd.type = "command";
  std::unique_ptr<DatasetTask> plain = open_ok(spec_of(kDir + "arith.jsonl"), 1, cmd);
  EXPECT_EQ(plain->problem(0, true).fields_json, "");  // none asked for: none sent
  cmd.row_fields = {"extra.level", "extra", "data_source", "*"};
  std::unique_ptr<DatasetTask> t = open_ok(spec_of(kDir + "arith.jsonl"), 1, cmd);
  ASSERT_TRUE(t->fit(ascii_codec(), 1000).ok());
  for (uint64_t i = 0; i < 3; ++i) {
    Problem p = t->problem(i, true);
    nlohmann::json f = nlohmann::json::parse(p.fields_json);
    ASSERT_TRUE(f.is_object()) << p.fields_json;
    EXPECT_EQ(f["row"]["prompt"], p.prompt);
    EXPECT_EQ(f["row"]["answer"], p.answer);
    EXPECT_EQ(f["extra"], f["row"]["extra"]);
    EXPECT_EQ(f["extra.level"], f["row"]["extra"]["level"]);
    EXPECT_TRUE(f.contains("data_source") && f["data_source"].is_null()) << p.fields_json;
  }
  api::DatasetSpec verl = spec_of(kDir + "verl.parquet", 2);
  verl.answer_field = "reward_model.ground_truth";
  cmd.row_fields = {"data_source", "reward_model.style"};
  std::unique_ptr<DatasetTask> v = open_ok(verl, 1, cmd);
  ASSERT_TRUE(v->fit(ascii_codec(), 1000).ok());
  EXPECT_EQ(v->problem(0, true).fields_json,
            R"({"data_source":"tlt/arith","reward_model.style":"rule"})");
}

// "What is 3 + 7?" is 14 characters, the prompts of rows 7..11 ("What is 10 + 21?") 16.
TEST(DatasetTask, LongPrompts) {
  api::DatasetSpec s = spec_of(kDir + "arith.jsonl", 2);
  s.long_prompts = "skip";
  std::unique_ptr<DatasetTask> t = open_ok(s);
  ASSERT_TRUE(t->fit(ascii_codec(), 15).ok());
  EXPECT_EQ(t->skipped(), 5);
  EXPECT_EQ(t->train_rows() + t->held_out_rows(), 7);
  for (uint64_t j = 0; j < 20; ++j) EXPECT_LE(t->problem(kRlOffset + j, false).prompt.size(), 15u);

  s.long_prompts = "truncate";
  t = open_ok(s);
  ASSERT_TRUE(t->fit(ascii_codec(), 15).ok());
  EXPECT_EQ(t->truncated(), 5);
  EXPECT_EQ(t->train_rows() + t->held_out_rows(), 12);
  for (uint64_t j = 0; j < 10; ++j) {
    Problem p = t->problem(kRlOffset + j, false);
    EXPECT_LE(p.prompt.size(), 15u);
    EXPECT_EQ(p.prompt.back(), '?');  // cut from the start: the question's end is kept
  }

  s.long_prompts = "fail";
  t = open_ok(s);
  Status st = t->fit(ascii_codec(), 15);
  EXPECT_NE(st.message().find("spec.task.dataset.longPrompts (fail): " + kDir + "arith.jsonl:"),
            std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("the prompt is 16 tokens, more than the 15"), std::string::npos);

  s.long_prompts = "skip";
  t = open_ok(s);
  EXPECT_NE(t->fit(ascii_codec(), 5).message().find("every training row"), std::string::npos);
}

// fit() tokenizes on every core: over thousands of rows (several threads' chunks) it skips,
// truncates and fails exactly the rows a row-by-row pass would, and `fail` names the first long
// training row in order.
TEST(DatasetTask, LongPromptsOverManyRowsOnEveryCore) {
  std::string rows;
  int n_long = 0;
  for (int i = 0; i < 3000; ++i) {
    bool long_prompt = i % 7 == 3;
    n_long += long_prompt;
    rows += "{\"prompt\": \"" + std::string(long_prompt ? "a longer prompt " : "") + "q" +
            std::to_string(i) + "\", \"answer\": \"1\"}\n";
  }
  api::DatasetSpec s = spec_of(write("many.jsonl", rows), 10);
  s.long_prompts = "skip";
  std::unique_ptr<DatasetTask> t = open_ok(s);
  ASSERT_TRUE(t->fit(ascii_codec(), 12).ok());
  EXPECT_EQ(t->skipped(), n_long);
  EXPECT_EQ(t->train_rows() + t->held_out_rows(), 3000 - n_long);
  s.long_prompts = "truncate";
  t = open_ok(s);
  ASSERT_TRUE(t->fit(ascii_codec(), 12).ok());
  EXPECT_EQ(t->truncated(), n_long);
  EXPECT_EQ(t->train_rows() + t->held_out_rows(), 3000);
  s.long_prompts = "fail";
  t = open_ok(s);
  std::set<std::string> held;
  for (int64_t i = 0; i < t->held_out_rows(); ++i) held.insert(t->problem(uint64_t(i), true).id);
  std::string first_long;  // the first long training row, in the file's order
  for (int i = 3; first_long.empty(); i += 7)
    if (!held.count(s.path + ":" + std::to_string(i + 1)))
      first_long = s.path + ":" + std::to_string(i + 1);
  Status st = t->fit(ascii_codec(), 12);
  EXPECT_NE(st.message().find("spec.task.dataset.longPrompts (fail): " + first_long + ": "),
            std::string::npos)
      << st.message() << " (want " << first_long << ")";
}

}  // namespace
}  // namespace tlt::rl
