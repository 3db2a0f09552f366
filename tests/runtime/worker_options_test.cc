// The worker options codec (runtime/rl/worker_options.h): the setup message the driver writes is
// the one the worker reads, and a malformed message names its field.
#include <gtest/gtest.h>

#include "runtime/rl/worker_options.h"

namespace tlt::rl {
namespace {

using nlohmann::json;

WorkerOptions sample() {
  WorkerOptions o;
  o.index = 3, o.dir = "/tmp/run", o.core = 1;
  o.preset = "micro", o.vocab = 128, o.model_card = "{\"architecture\":\"llama\"}";
  o.max_seq = 864, o.max_batch = 12;
  o.seed = 0xfedcba9876543210ull;  // above INT64_MAX: must stay unsigned
  o.decode_bfloat16 = true, o.drafter_bfloat16 = false;
  o.drafter_vocab_ids = {5, 7, 11};
  WorkerSpec& w = o.spec;
  w.activation_threshold = 5;
  w.arms = {"6_2_8", "ngram"};
  w.ngram_shortcut = 2, w.draft_confidence = 0.25, w.drafter_catch_up_limit = 4;
  w.selector = "fixed", w.buckets = {1, 3}, w.epsilon = 0.05, w.window = 16;
  w.selector_value = "median", w.selector_exploration = "optimistic";
  w.drafter_layers = 2, w.drafter_train_levels = 1, w.drafter_vocab_subset = 4096;
  w.drafter_fused = true;
  w.drafter_learning_rate = 5e-4, w.drafter_batch = 8;
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
  EXPECT_EQ(back->preset, o.preset);
  EXPECT_EQ(back->vocab, o.vocab);
  EXPECT_EQ(back->model_card, o.model_card);
  EXPECT_EQ(back->max_seq, o.max_seq);
  EXPECT_EQ(back->max_batch, o.max_batch);
  EXPECT_EQ(back->seed, o.seed);
  EXPECT_EQ(back->decode_bfloat16, o.decode_bfloat16);
  EXPECT_EQ(back->drafter_bfloat16, o.drafter_bfloat16);
  EXPECT_EQ(back->drafter_vocab_ids, o.drafter_vocab_ids);
  const WorkerSpec &w = back->spec, &x = o.spec;
  EXPECT_EQ(w.activation_threshold, x.activation_threshold);
  EXPECT_EQ(w.arms, x.arms);
  EXPECT_EQ(w.ngram_shortcut, x.ngram_shortcut);
  EXPECT_EQ(w.draft_confidence, x.draft_confidence);
  EXPECT_EQ(w.drafter_catch_up_limit, x.drafter_catch_up_limit);
  EXPECT_EQ(w.selector, x.selector);
  EXPECT_EQ(w.buckets, x.buckets);
  EXPECT_EQ(w.epsilon, x.epsilon);
  EXPECT_EQ(w.window, x.window);
  EXPECT_EQ(w.selector_value, x.selector_value);
  EXPECT_EQ(w.selector_exploration, x.selector_exploration);
  EXPECT_EQ(w.drafter_layers, x.drafter_layers);
  EXPECT_EQ(w.drafter_train_levels, x.drafter_train_levels);
  EXPECT_EQ(w.drafter_fused, x.drafter_fused);
  EXPECT_EQ(w.drafter_vocab_subset, x.drafter_vocab_subset);
  EXPECT_EQ(w.drafter_learning_rate, x.drafter_learning_rate);
  EXPECT_EQ(w.drafter_batch, x.drafter_batch);
  // Every key the writer puts in is one the reader takes: re-encoding gives the same message.
  EXPECT_EQ(to_json(*back), m);
}

TEST(WorkerOptions, MalformedMessagesNameTheField) {
  json missing = to_json(sample());
  missing.erase("arms");
  StatusOr<WorkerOptions> r = worker_options_from_json(missing);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("\"arms\""), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("missing"), std::string::npos) << r.status().message();

  json mistyped = to_json(sample());
  mistyped["max_batch"] = "twelve";
  r = worker_options_from_json(mistyped);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("\"max_batch\""), std::string::npos) << r.status().message();

  json bad_element = to_json(sample());
  bad_element["buckets"] = json::array({1, "two"});
  r = worker_options_from_json(bad_element);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("\"buckets\""), std::string::npos) << r.status().message();

  json negative_seed = to_json(sample());
  negative_seed["seed"] = -1;
  EXPECT_FALSE(worker_options_from_json(negative_seed).ok());

  EXPECT_FALSE(worker_options_from_json(json::array()).ok());
}

TEST(WorkerOptions, WorkerSpecComesFromTheJobSpec) {
  api::RLJobSpec spec;
  spec.speculative.arms = {"8_4_16"};
  spec.speculative.selector.window = 7;
  spec.drafter.layers = 2;
  spec.drafter.training.batch_size = 9;
  spec.drafter.training.learning_rate = 1e-3;
  WorkerSpec w = worker_spec_from(spec);
  EXPECT_EQ(w.arms, spec.speculative.arms);
  EXPECT_EQ(w.window, 7);
  EXPECT_EQ(w.drafter_layers, 2);
  EXPECT_EQ(w.drafter_batch, 9);
  EXPECT_EQ(w.drafter_learning_rate, 1e-3);
  EXPECT_EQ(w.activation_threshold, spec.speculative.activation_threshold);
}

}  // namespace
}  // namespace tlt::rl
