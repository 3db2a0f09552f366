// Every validation rule has a test: the range and enum rules of every field are exercised by
// walking the field tables themselves (so a new rule is tested the day it is written), and each
// cross-field rule has its own case below.
#include "api/validate.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <sstream>

#include "api/encode.h"
#include "api/manifest.h"

namespace tlt::api {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

const std::string kRLBase = std::string(TLT_SOURCE_DIR) + "/examples/rljob-tiny.yaml";
const std::string kTSTBase = std::string(TLT_SOURCE_DIR) + "/examples/tst-tiny.yaml";

// A leaf field of a spec with its rule.
struct Leaf {
  std::string path;  // "spec.algorithm.steps"
  Rule rule;
  bool is_number = false, is_string = false;
};

class LeafCollector {
 public:
  LeafCollector(std::string path, std::vector<Leaf>* out) : path_(std::move(path)), out_(out) {}
  template <class T>
  void operator()(const char* key, T& value, const Rule& rule) {
    std::string p = join_path(path_, key);
    if constexpr (is_described<T>::value) {
      LeafCollector nested(p, out_);
      value.fields(nested);
    } else {
      constexpr bool number = std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t> ||
                              std::is_same_v<T, double> ||
                              std::is_same_v<T, std::optional<int64_t>>;
      out_->push_back({p, rule, number, std::is_same_v<T, std::string>});
    }
  }

 private:
  std::string path_;
  std::vector<Leaf>* out_;
};

template <class Spec>
std::vector<Leaf> leaves() {
  std::vector<Leaf> out;
  Spec spec;
  LeafCollector c("spec", &out);
  spec.fields(c);
  return out;
}

// Sets `path` (dot-separated, from the document root) to `value` in the manifest text.
std::string with_value(const std::string& base, const std::string& path, const YAML::Node& value) {
  YAML::Node root = YAML::Load(base);
  std::vector<std::string> keys;
  std::stringstream ss(path);
  for (std::string k; std::getline(ss, k, '.');) keys.push_back(k);
  std::vector<YAML::Node> chain{root};
  for (size_t i = 0; i + 1 < keys.size(); ++i) {
    YAML::Node child = chain.back()[keys[i]];
    if (!child.IsMap()) chain.back()[keys[i]] = YAML::Node(YAML::NodeType::Map);
    chain.push_back(chain.back()[keys[i]]);
  }
  chain.back()[keys.back()] = value;
  YAML::Emitter out;
  out << root;
  return out.c_str();
}

bool has_error_at(const std::string& manifest, const std::string& path, std::string* all) {
  std::vector<Document> docs = parse_manifests(manifest);
  for (const Document& d : docs) {
    for (const FieldError& e : d.errors) {
      *all += e.to_string() + "\n";
      if (e.path == path) return true;
    }
  }
  return false;
}

void check_every_range_and_enum_rule(const std::string& base, const std::vector<Leaf>& fields) {
  int n_checked = 0;
  for (const Leaf& leaf : fields) {
    std::vector<std::string> bad_values;
    if (leaf.is_number && leaf.rule.min) {
      double v = *leaf.rule.min - (leaf.rule.min_exclusive ? 0 : 1);
      bad_values.push_back(format_number(v));
    }
    if (leaf.is_number && leaf.rule.max) {
      double v = *leaf.rule.max + (leaf.rule.max_exclusive ? 0 : 1);
      bad_values.push_back(format_number(v));
    }
    if (leaf.is_string && !leaf.rule.one_of.empty()) bad_values.push_back("no-such-value");
    if (leaf.is_string && leaf.rule.format == Rule::Format::kUrl) {
      for (const char* url : {"ftp:x", "http://h/a/../b", "http://h/a%2Fb"})
        bad_values.push_back(url);
      bad_values.push_back("http://h/" + std::string(kMaxUrlLength, 'a'));
    }
    if (leaf.is_string && leaf.rule.format == Rule::Format::kDevice) {
      for (const char* d : {"", "gpu", "cuda:", "cuda:-1", "cuda:x", "cpu:0"})
        bad_values.push_back(d);
    }
    for (const std::string& bad : bad_values) {
      std::string all;
      EXPECT_TRUE(has_error_at(with_value(base, leaf.path, YAML::Node(bad)), leaf.path, &all))
          << leaf.path << " = " << bad << " was accepted; errors:\n"
          << all;
      ++n_checked;
    }
    // The boundary itself is allowed when inclusive.
    if (leaf.is_number && leaf.rule.min && !leaf.rule.min_exclusive) {
      std::string all;
      std::string at_min = format_number(*leaf.rule.min);
      bool rejected =
          has_error_at(with_value(base, leaf.path, YAML::Node(at_min)), leaf.path, &all);
      // Cross-field rules may still object to the minimum (e.g. replicas); the range rule may not.
      EXPECT_TRUE(!rejected || all.find("must be >= " + at_min + " ") == std::string::npos)
          << leaf.path << " = " << at_min << " hit its own range rule:\n"
          << all;
    }
  }
  EXPECT_GT(n_checked, 20);
}

TEST(ValidateRules, EveryRLJobRangeAndEnumRuleRejects) {
  check_every_range_and_enum_rule(read_file(kRLBase), leaves<RLJobSpec>());
}

TEST(ValidateRules, EveryTSTRangeAndEnumRuleRejects) {
  check_every_range_and_enum_rule(read_file(kTSTBase), leaves<TSTPretrainJobSpec>());
}

TEST(ValidateRules, DeviceAcceptsEveryForm) {
  for (const char* d : {"auto", "cpu", "cuda", "cuda:0", "cuda:3"}) {
    std::string all;
    EXPECT_FALSE(has_error_at(with_value(read_file(kRLBase), "spec.model.device", YAML::Node(d)),
                              "spec.model.device", &all))
        << d << ":\n"
        << all;
  }
  std::string all;
  EXPECT_TRUE(has_error_at(with_value(read_file(kRLBase), "spec.model.device", YAML::Node("gpu")),
                           "spec.model.device", &all));
  EXPECT_NE(all.find("\"cuda:N\""), std::string::npos) << all;
}

TEST(ValidateRules, EveryFieldIsDocumented) {
  for (const auto& list : {leaves<RLJobSpec>(), leaves<TSTPretrainJobSpec>()}) {
    for (const Leaf& leaf : list) EXPECT_FALSE(leaf.rule.documentation.empty()) << leaf.path;
  }
}

// ---- cross-field rules, one case each -------------------------------------------------------

FieldErrors errors_of(const std::string& yaml) {
  std::vector<Document> docs = parse_manifests(yaml);
  EXPECT_EQ(docs.size(), 1u);
  return docs.empty() ? FieldErrors{} : docs[0].errors;
}

std::string rl_with(const std::string& path, const YAML::Node& v) {
  return with_value(read_file(kRLBase), path, v);
}
std::string tst_with(const std::string& path, const YAML::Node& v) {
  return with_value(read_file(kTSTBase), path, v);
}

void expect_single_error(const std::string& yaml, const std::string& path,
                         const std::string& fragment) {
  FieldErrors errors = errors_of(yaml);
  ASSERT_EQ(errors.size(), 1u) << join_errors(errors);
  EXPECT_EQ(errors[0].path, path);
  EXPECT_NE(errors[0].message.find(fragment), std::string::npos) << errors[0].message;
}

TEST(ValidateCross, ExamplesAreValid) {
  EXPECT_TRUE(errors_of(read_file(kRLBase)).empty());
  EXPECT_TRUE(errors_of(read_file(kTSTBase)).empty());
}

TEST(ValidateCross, NameMustStartWithLetter) {
  expect_single_error(rl_with("metadata.name", YAML::Node("1job")), "metadata.name",
                      "must start with a letter");
}

TEST(ValidateCross, NameLengthLeavesRoomForPodNames) {
  expect_single_error(rl_with("metadata.name", YAML::Node(std::string(48, 'a'))), "metadata.name",
                      "at most 47");
  EXPECT_TRUE(errors_of(rl_with("metadata.name", YAML::Node(std::string(47, 'a')))).empty());
}

TEST(ValidateCross, GenerateNameIsRefused) {
  std::string y = rl_with("metadata.generateName", YAML::Node("job-"));
  FieldErrors errors = errors_of(y);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].path, "metadata.generateName");
}

TEST(ValidateCross, ModelPresetAndPathExclusive) {
  expect_single_error(rl_with("spec.model.path", YAML::Node("/m.gguf")), "spec.model.path",
                      "not both");
}

TEST(ValidateCross, ModelFormatNeedsPath) {
  expect_single_error(rl_with("spec.model.format", YAML::Node("gguf")), "spec.model.format",
                      "set path too");
}

TEST(ValidateCross, DrafterReplicasWithinBounds) {
  expect_single_error(rl_with("spec.roles.drafter.replicas", YAML::Node(3)),
                      "spec.roles.drafter.replicas", "between minReplicas and maxReplicas (0..2)");
  expect_single_error(rl_with("spec.roles.drafter.minReplicas", YAML::Node(3)),
                      "spec.roles.drafter.minReplicas", "must be <= maxReplicas (2)");
}

TEST(ValidateCross, RolloutAndTrainerNeedOne) {
  expect_single_error(rl_with("spec.roles.rollout.replicas", YAML::Node(0)),
                      "spec.roles.rollout.replicas", "must be >= 1 (got 0)");
  expect_single_error(rl_with("spec.roles.trainer.replicas", YAML::Node(0)),
                      "spec.roles.trainer.replicas", "must be >= 1 (got 0)");
}

// Trainer ranks take whole GRPO groups: more ranks than prompts in a step are refused, also
// where the operator reads a job already stored (parse_job_json).
TEST(ValidateCross, TrainerRanksAtMostPromptsPerStep) {
  auto ranks = [](int n) {
    return with_value(rl_with("spec.algorithm.promptsPerStep", YAML::Node(2)),
                      "spec.roles.trainer.replicas", YAML::Node(n));
  };
  expect_single_error(
      ranks(3), "spec.roles.trainer.replicas",
      "must be <= spec.algorithm.promptsPerStep (2): each trainer rank takes "
      "whole GRPO groups, one per prompt; lower it or raise promptsPerStep (got 3)");
  EXPECT_TRUE(errors_of(ranks(2)).empty()) << "one rank per prompt is the most";
  std::vector<Document> docs =
      parse_manifests(rl_with("spec.roles.trainer.replicas", YAML::Node(4)));
  ASSERT_EQ(docs.size(), 1u);
  ASSERT_TRUE(docs[0].job.has_value());
  nlohmann::json stored = std::visit([](const auto& j) { return to_json(j); }, *docs[0].job);
  stored["spec"]["roles"]["trainer"]["replicas"] = 4097;
  StatusOr<Job> job = parse_job_json(stored);
  ASSERT_FALSE(job.ok());
  EXPECT_NE(job.status().message().find("spec.roles.trainer.replicas: must be <= 4096 (got 4097)"),
            std::string::npos)
      << job.status().message();
}

// The operator's allow-list compares spec.reward.url as written, and the scorer POSTs it as
// written: a path that a server would resolve to somewhere else is refused.
TEST(ValidateCross, RewardUrlPathsThatResolveElsewhereAreRefused) {
  std::string http = rl_with("spec.reward.type", YAML::Node("http"));
  auto with_url = [&](const std::string& url) {
    return with_value(http, "spec.reward.url", YAML::Node(url));
  };
  for (const char* url :
       {"http://rm.scoring:8000/v1/score/../../admin",
        "http://rm.scoring:8000/v1/score/%2e%2e/admin", "http://rm.scoring:8000/v1/%2E%2E/x",
        "http://rm.scoring:8000/v1/score/./x", "http://rm.scoring:8000/v1/score/..",
        "http://rm.scoring:8000/v1/.%2e?q=1", "http://rm.scoring:8000/v1/..;/admin"}) {
    expect_single_error(with_url(url), "spec.reward.url", "segment in its path");
  }
  for (const char* url : {"http://rm.scoring:8000/v1/score%2F..%2Fadmin",
                          "http://rm.scoring:8000/v1/score%5c..", "http://rm.scoring:8000/v1\\x"}) {
    expect_single_error(with_url(url), "spec.reward.url", "encoded slash or a backslash");
  }
  for (const char* url :
       {"http://rm.scoring:8000/v1/score", "http://rm.scoring:8000/v1/...",
        "http://rm.scoring:8000/v1/a..b/.x/x.", "http://rm.scoring:8000/v1/%2e%2ex",
        "http://rm.scoring:8000/v1?next=/../admin", "http://rm.scoring:8000"}) {
    EXPECT_TRUE(errors_of(with_url(url)).empty())
        << url << ": " << join_errors(errors_of(with_url(url)));
  }
}

TEST(ValidateCross, BucketsStartAtOneAndIncrease) {
  YAML::Node empty(YAML::NodeType::Sequence);
  expect_single_error(rl_with("spec.speculative.selector.buckets", empty),
                      "spec.speculative.selector.buckets", "at least one bucket");
  expect_single_error(rl_with("spec.speculative.selector.buckets", YAML::Load("[1, 4, 4]")),
                      "spec.speculative.selector.buckets[2]", "greater than the bucket before");
  expect_single_error(rl_with("spec.speculative.selector.buckets", YAML::Load("[3]")),
                      "spec.speculative.selector.buckets[0]", "must be 1");
}

TEST(ValidateCross, ArmsParseAndAreUnique) {
  expect_single_error(rl_with("spec.speculative.arms", YAML::Load("[]")), "spec.speculative.arms",
                      "at least one arm");
  expect_single_error(rl_with("spec.speculative.arms", YAML::Load("['8_4']")),
                      "spec.speculative.arms[0]", "depth_topk_verifyTokens");
  expect_single_error(rl_with("spec.speculative.arms", YAML::Load("['0_4_8']")),
                      "spec.speculative.arms[0]", "1 <= depth");
  expect_single_error(rl_with("spec.speculative.arms", YAML::Load("['2_2_8']")),
                      "spec.speculative.arms[0]", "has only 7");
  expect_single_error(rl_with("spec.speculative.arms", YAML::Load("['ngram', 'ngram']")),
                      "spec.speculative.arms[1]", "repeats");
  expect_single_error(rl_with("spec.speculative.arms", YAML::Load("['ngram', 'ngram_0']")),
                      "spec.speculative.arms[1]", "1 to 64 tokens");
  expect_single_error(rl_with("spec.speculative.arms", YAML::Load("['ngram_x']")),
                      "spec.speculative.arms[0]", "ngram_D");
  EXPECT_TRUE(
      errors_of(rl_with("spec.speculative.arms", YAML::Load("['ngram', 'ngram_4']"))).empty());
  EXPECT_TRUE(
      errors_of(rl_with("spec.speculative.arms", YAML::Load("['history', '4_1_5']"))).empty());
  // Disabled speculation may list no arms.
  std::string y = with_value(rl_with("spec.speculative.arms", YAML::Load("[]")),
                             "spec.speculative.enabled", YAML::Node(false));
  EXPECT_TRUE(errors_of(y).empty());
}

TEST(ValidateCross, DraftConfidenceIsAProbability) {
  expect_single_error(rl_with("spec.speculative.draftConfidence", YAML::Node(1.5)),
                      "spec.speculative.draftConfidence", "<= 1");
  expect_single_error(rl_with("spec.speculative.drafterCatchUpLimit", YAML::Node(-1)),
                      "spec.speculative.drafterCatchUpLimit", ">= 0");
  EXPECT_TRUE(errors_of(rl_with("spec.speculative.draftConfidence", YAML::Node(0.3))).empty());
}

TEST(ParseArm, ReadsDepthTopKVerify) {
  Arm arm;
  std::string why;
  ASSERT_TRUE(parse_arm("8_4_48", &arm, &why));
  EXPECT_EQ(arm.depth, 8);
  EXPECT_EQ(arm.top_k, 4);
  EXPECT_EQ(arm.verify_tokens, 48);
  EXPECT_FALSE(arm.ngram);
  ASSERT_TRUE(parse_arm("ngram", &arm, &why));
  EXPECT_TRUE(arm.ngram);
  EXPECT_EQ(arm.depth, kNgramDepth);
  EXPECT_EQ(arm.verify_tokens, kNgramDepth + 1);
  ASSERT_TRUE(parse_arm("ngram_4", &arm, &why));
  EXPECT_TRUE(arm.ngram);
  EXPECT_EQ(arm.depth, 4);
  EXPECT_EQ(arm.verify_tokens, 5);
  ASSERT_TRUE(parse_arm("history", &arm, &why));
  EXPECT_TRUE(arm.history);
  EXPECT_FALSE(arm.ngram);
  EXPECT_EQ(arm.top_k, 0);
  EXPECT_EQ(arm.depth, kHistoryDepth);
  EXPECT_EQ(arm.verify_tokens, kHistoryTokens);
  EXPECT_FALSE(parse_arm("history_4", &arm, &why));
  EXPECT_FALSE(parse_arm("ngram_65", &arm, &why));
  EXPECT_FALSE(parse_arm("ngram_", &arm, &why));
  EXPECT_FALSE(parse_arm("ngram_4x", &arm, &why));
  EXPECT_FALSE(parse_arm("8_4_48x", &arm, &why));
  EXPECT_FALSE(parse_arm("-8_4_4", &arm, &why));
}

TEST(ValidateCross, RebalancingNeedsUrlAndSaneWindow) {
  std::string y = rl_with("spec.rebalancing.enabled", YAML::Node(true));
  expect_single_error(y, "spec.rebalancing.prometheusURL", "is required");
  expect_single_error(rl_with("spec.rebalancing.window", YAML::Node("5s")),
                      "spec.rebalancing.window", "at least the interval (\"15s\")");
}

TEST(ValidateCross, RebalancingKeepsRolloutCapacity) {
  std::string y = with_value(rl_with("spec.rebalancing.enabled", YAML::Node(true)),
                             "spec.rebalancing.prometheusURL", YAML::Node("http://p:9090"));
  EXPECT_TRUE(errors_of(y).empty());
  y = with_value(y, "spec.rebalancing.minRolloutReplicas", YAML::Node(3));
  expect_single_error(y, "spec.rebalancing.minRolloutReplicas",
                      "must be <= spec.roles.rollout.replicas (2)");
}

TEST(ValidateCross, MinIdleWorkersReachable) {
  expect_single_error(rl_with("spec.drafter.training.minIdleWorkers", YAML::Node(5)),
                      "spec.drafter.training.minIdleWorkers", "never starts");
}

TEST(ValidateCross, CheckpointEveryNeedsPath) {
  expect_single_error(rl_with("spec.checkpoint.path", YAML::Node("")), "spec.checkpoint.path",
                      "is required");
  expect_single_error(tst_with("spec.checkpoint.path", YAML::Node("")), "spec.checkpoint.path",
                      "is required");
}

TEST(ValidateCross, CorpusFilesNeedPathsAndOnlyThen) {
  expect_single_error(tst_with("spec.data.corpus", YAML::Node("files")), "spec.data.paths",
                      "at least one text file");
  expect_single_error(tst_with("spec.data.paths", YAML::Load("[a.txt]")), "spec.data.paths",
                      "only applies when corpus is files");
}

TEST(ValidateCross, WarmupShorterThanTraining) {
  expect_single_error(tst_with("spec.training.schedule.warmupSteps", YAML::Node(300)),
                      "spec.training.schedule.warmupSteps", "must be < steps (300)");
}

TEST(ValidateCross, PhaseSwitchInStablePart) {
  expect_single_error(tst_with("spec.superposition.ratio", YAML::Node(0.05)),
                      "spec.superposition.ratio", "step 15, outside the stable part");
  expect_single_error(tst_with("spec.superposition.ratio", YAML::Node(0.85)),
                      "spec.superposition.ratio", "outside the stable part");
  // The baseline (superposition off) has no switch to check.
  std::string y = with_value(tst_with("spec.superposition.ratio", YAML::Node(0.05)),
                             "spec.superposition.enabled", YAML::Node(false));
  EXPECT_TRUE(errors_of(y).empty());
}

TEST(ValidateCross, BatchDividesAmongWorkers) {
  expect_single_error(tst_with("spec.workers.replicas", YAML::Node(5)), "spec.training.batchSize",
                      "divisible by spec.workers.replicas (5)");
  EXPECT_TRUE(errors_of(tst_with("spec.workers.replicas", YAML::Node(4))).empty());
}

TEST(FormatNumber, IsShortAndExact) {
  EXPECT_EQ(format_number(0.05), "0.05");
  EXPECT_EQ(format_number(32), "32");
  EXPECT_EQ(format_number(1e-5), "1e-05");
}

}  // namespace
}  // namespace tlt::api
