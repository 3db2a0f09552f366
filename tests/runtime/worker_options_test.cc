// The worker options codec (runtime/rl/worker_options.h): the setup message the driver writes is
// the one the worker reads, the job spec's parts travel whole through their field tables, and a
// malformed message names its field.
#include <gtest/gtest.h>

#include "api/encode.h"
#include "runtime/rl/worker_options.h"
#include "runtime/rollout/spec_options.h"

namespace tlt::rl {
namespace {

using nlohmann::json;

WorkerOptions sample() {
  WorkerOptions o;
  o.index = 3, o.dir = "/tmp/run", o.core = 1, o.device = "cuda:1";
  o.preset = "micro", o.vocab = 128, o.model_card = "{\"architecture\":\"llama\"}";
  o.max_seq = 864, o.max_batch = 12;
  o.seed = 0xfedcba9876543210ull;  // above INT64_MAX: must stay unsigned
  o.decode_bfloat16 = true, o.drafter_bfloat16 = false;
  o.drafter_vocab_ids = {5, 7, 11};
  api::SpeculativeSpec& s = o.speculative;
  s.enabled = false, s.activation_threshold = 5;
  s.arms = {"6_2_8", "ngram"};
  s.ngram_shortcut = 2, s.draft_confidence = 0.25, s.drafter_catch_up_limit = 4;
  s.selector.type = "fixed", s.selector.buckets = {1, 3}, s.selector.epsilon = 0.05;
  s.selector.window = 16, s.selector.value = "median", s.selector.exploration = "weighted";
  s.selector.pooled = false;
  api::DrafterSpec& d = o.drafter;
  d.layers = 2, d.train_levels = 1, d.vocab_subset = 4096, d.features = "fused";
  d.warm_start_steps = 17, d.warm_start_prompts = 9;
  d.training.enabled = false, d.training.learning_rate = 5e-4, d.training.batch_size = 8;
  d.training.min_idle_workers = 2, d.training.buffer_steps = 3;
  return o;
}

TEST(WorkerOptions, RoundTripsThroughTheSetupMessageText) {
  WorkerOptions o = sample();
  json m = json::parse(to_json(o).dump());  // as it crosses the channel
  EXPECT_EQ(m.at("op"), "setup");
  StatusOr<WorkerOptions> back = worker_options_from_json(m);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->index, o.index);
  EXPECT_EQ(back->dir, o.dir);
  EXPECT_EQ(back->core, o.core);
  EXPECT_EQ(back->device, o.device);
  EXPECT_EQ(back->preset, o.preset);
  EXPECT_EQ(back->vocab, o.vocab);
  EXPECT_EQ(back->model_card, o.model_card);
  EXPECT_EQ(back->max_seq, o.max_seq);
  EXPECT_EQ(back->max_batch, o.max_batch);
  EXPECT_EQ(back->seed, o.seed);
  EXPECT_EQ(back->decode_bfloat16, o.decode_bfloat16);
  EXPECT_EQ(back->drafter_bfloat16, o.drafter_bfloat16);
  EXPECT_EQ(back->drafter_vocab_ids, o.drafter_vocab_ids);
  // The spec's parts, every field (the field tables' encoding compares them all).
  EXPECT_EQ(api::to_json(back->speculative), api::to_json(o.speculative));
  EXPECT_EQ(api::to_json(back->drafter), api::to_json(o.drafter));
  EXPECT_EQ(back->speculative.arms, o.speculative.arms);
  EXPECT_EQ(back->speculative.draft_confidence, 0.25);
  EXPECT_EQ(back->drafter.features, "fused");
  EXPECT_EQ(back->drafter.training.learning_rate, 5e-4);
  // Every key the writer puts in is one the reader takes: re-encoding gives the same message.
  EXPECT_EQ(to_json(*back), m);
}

TEST(WorkerOptions, AbsentSpecFieldsTakeTheSpecsDefaults) {
  json m = to_json(sample());
  m["spec"]["speculative"].erase("activationThreshold");
  m["spec"]["drafter"]["training"].erase("batchSize");
  StatusOr<WorkerOptions> back = worker_options_from_json(m);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->speculative.activation_threshold, api::SpeculativeSpec{}.activation_threshold);
  EXPECT_EQ(back->drafter.training.batch_size, api::DrafterTrainingSpec{}.batch_size);
}

TEST(WorkerOptions, MalformedMessagesNameTheField) {
  json missing = to_json(sample());
  missing.erase("max_batch");
  StatusOr<WorkerOptions> r = worker_options_from_json(missing);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("\"max_batch\""), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("missing"), std::string::npos) << r.status().message();

  json mistyped = to_json(sample());
  mistyped["max_batch"] = "twelve";
  r = worker_options_from_json(mistyped);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("\"max_batch\""), std::string::npos) << r.status().message();

  json no_part = to_json(sample());
  no_part["spec"].erase("speculative");
  r = worker_options_from_json(no_part);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("\"spec.speculative\" is missing"), std::string::npos)
      << r.status().message();
  // A top-level "drafter" is a file field to a remote worker's Channel: the parts sit under "spec".
  EXPECT_FALSE(to_json(sample()).contains("drafter"));

  json bad_element = to_json(sample());
  bad_element["spec"]["speculative"]["selector"]["buckets"] = json::array({1, "two"});
  r = worker_options_from_json(bad_element);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("spec.speculative.selector.buckets[1]"), std::string::npos)
      << r.status().message();

  json bad_arm = to_json(sample());
  bad_arm["spec"]["speculative"]["arms"] = json::array({"4_1_5", json::object()});
  r = worker_options_from_json(bad_arm);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("speculative.arms[1]"), std::string::npos)
      << r.status().message();

  json unknown = to_json(sample());
  unknown["spec"]["drafter"]["layerz"] = 2;
  r = worker_options_from_json(unknown);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("drafter.layerz"), std::string::npos) << r.status().message();

  json negative_seed = to_json(sample());
  negative_seed["seed"] = -1;
  EXPECT_FALSE(worker_options_from_json(negative_seed).ok());

  EXPECT_FALSE(worker_options_from_json(json::array()).ok());
}

// The engine's options are spec.speculative's, field by field (rollout::engine_options).
TEST(WorkerOptions, EngineOptionsComeFromTheSpeculativeSpec) {
  const api::SpeculativeSpec s = sample().speculative;
  rollout::EngineOptions eo = rollout::engine_options(s);
  EXPECT_EQ(eo.speculative, s.enabled);
  EXPECT_EQ(eo.activation_threshold, s.activation_threshold);
  EXPECT_EQ(eo.arms, s.arms);
  EXPECT_EQ(eo.ngram_shortcut, s.ngram_shortcut);
  EXPECT_EQ(eo.draft_confidence, s.draft_confidence);
  EXPECT_EQ(eo.drafter_catch_up_limit, s.drafter_catch_up_limit);
  EXPECT_EQ(eo.selector, s.selector.type);
  EXPECT_EQ(eo.buckets, s.selector.buckets);
  EXPECT_EQ(eo.epsilon, s.selector.epsilon);
  EXPECT_EQ(eo.window, s.selector.window);
  EXPECT_EQ(eo.selector_value, s.selector.value);
  EXPECT_EQ(eo.selector_exploration, s.selector.exploration);
}

}  // namespace
}  // namespace tlt::rl
