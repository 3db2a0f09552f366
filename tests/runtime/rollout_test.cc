// The rollout engine end to end: speculative decoding is lossless.
//  - Greedy: speculative output equals plain output token for token over 200 prompts, batch
//    sizes 1..32, chain, tree, n-gram and history arms, an untrained and a trained drafter
//    (float64, so accumulation order cannot flip a near-tie; see the note in
//    runtime/rollout/engine.h).
//  - Sampling: a two-sample chi-square test finds speculative and plain sampling alike on the
//    first tokens' distribution, and finds deliberately broken acceptance rules out (for sampled
//    chains and for history drafts).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "runtime/drafter/trainer.h"
#include "runtime/model/precision.h"
#include "runtime/rollout/engine.h"
#include "tests/runtime/engine_checks.h"
#include "tests/runtime/requests.h"

namespace tlt::rollout {
namespace {

using model::Drafter;
using model::ModelConfig;
using model::Transformer;

ModelConfig small_config(int64_t vocab) {
  ModelConfig c;
  c.vocab = vocab, c.dim = 32, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.ffn = 64;
  c.max_seq = 128;
  return c;
}

Transformer make_target(int64_t vocab, uint64_t seed, double head_scale) {
  return test_support::peaked_target(small_config(vocab), seed, head_scale);
}

using test_support::expect_same_tokens;
using test_support::gamma_q;
using test_support::homogeneity_p;
using test_support::plain_options;
using test_support::random_requests;
using test_support::run;
using test_support::spec_options;

// Trains the drafter on the target's greedy continuations of `reqs` for `steps` updates.
void train_drafter(Transformer target, Drafter drafter, const std::vector<Request>& reqs,
                   int steps) {
  std::vector<Completion> outs = run(target, Drafter(nullptr), plain_options(32), reqs);
  drafter::DrafterTrainer trainer(drafter, target, 3e-3);
  std::mt19937_64 rng(1);
  for (int s = 0; s < steps; ++s) {
    const Request& r = reqs[rng() % reqs.size()];
    std::vector<int64_t> seq = r.prompt;
    const std::vector<int64_t>& gen = outs[r.id].tokens;
    seq.insert(seq.end(), gen.begin(), gen.end());
    int64_t t = int64_t(seq.size());
    torch::Tensor toks = torch::tensor(seq, torch::kInt64).view({1, t});
    torch::Tensor hidden;
    {
      torch::NoGradGuard g;
      hidden =
          target->forward(toks, model::sequential_positions(torch::zeros({1}, torch::kInt64), t))
              .hidden;
    }
    trainer.step(toks, hidden, torch::ones({1, t}));
  }
  drafter->eval();
}

class GreedyExactness : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    target_ = new Transformer(make_target(64, 11, 30.0));
    reqs_ = new std::vector<Request>(random_requests(200, 64, 24, 0.0, 3));
    plain_ =
        new std::vector<Completion>(run(*target_, Drafter(nullptr), plain_options(32), *reqs_));
  }
  static void TearDownTestSuite() {
    delete target_;
    delete reqs_;
    delete plain_;
  }
  static Transformer* target_;
  static std::vector<Request>* reqs_;
  static std::vector<Completion>* plain_;
};
Transformer* GreedyExactness::target_ = nullptr;
std::vector<Request>* GreedyExactness::reqs_ = nullptr;
std::vector<Completion>* GreedyExactness::plain_ = nullptr;

TEST_F(GreedyExactness, PlainIsIndependentOfBatchSize) {
  expect_same_tokens(run(*target_, Drafter(nullptr), plain_options(1), *reqs_), *plain_, "batch 1");
  expect_same_tokens(run(*target_, Drafter(nullptr), plain_options(7), *reqs_), *plain_, "batch 7");
}

// Requests join in one padded prefill forward; the hidden states handed to the sink (the
// drafter's training data) must be those of each prompt alone, padding notwithstanding.
TEST_F(GreedyExactness, BatchedRaggedPrefillHandsTheSameHiddenStatesAsOneAtATime) {
  std::vector<Request> reqs(reqs_->begin(), reqs_->begin() + 12);
  for (Request& r : reqs) r.max_new_tokens = 3;
  auto collect = [&](int64_t max_batch) {
    std::map<int64_t, std::vector<torch::Tensor>> hidden;  // id -> (n, C) pieces
    std::map<int64_t, std::vector<int64_t>> tokens;
    auto engine =
        std::move(Engine::create(*target_, Drafter(nullptr), plain_options(max_batch)).value());
    engine->set_hidden_sink([&](int64_t id, const std::vector<int64_t>& t, const torch::Tensor& h) {
      hidden[id].push_back(h.clone());
      tokens[id].insert(tokens[id].end(), t.begin(), t.end());
    });
    EXPECT_TRUE(engine->generate(reqs).ok());
    std::map<int64_t, torch::Tensor> out;
    for (auto& [id, pieces] : hidden) out[id] = torch::cat(pieces, 0);
    return std::make_pair(out, tokens);
  };
  auto [alone_h, alone_t] = collect(1);
  auto [batched_h, batched_t] = collect(12);
  ASSERT_EQ(alone_h.size(), reqs.size());
  size_t lengths = 0;
  for (const Request& r : reqs) {
    EXPECT_EQ(alone_t[r.id], batched_t[r.id]) << "request " << r.id;
    ASSERT_EQ(alone_h[r.id].sizes(), batched_h[r.id].sizes()) << "request " << r.id;
    EXPECT_TRUE(torch::allclose(alone_h[r.id], batched_h[r.id], 1e-4, 1e-5)) << "request " << r.id;
    lengths |= size_t(1) << r.prompt.size();
  }
  EXPECT_GT(__builtin_popcountll(lengths), 2) << "the prompts should be ragged";
}

// A GRPO group's samples share their prompt: the engine prefills each distinct prompt once and
// the others copy its keys and values (EngineOptions::share_prompts). Sampled tokens are those
// of prefilling each, in plain decoding and with speculation, and the prompt forwards run a
// quarter of the positions.
TEST_F(GreedyExactness, RequestsSharingAPromptPrefillItOnce) {
  std::vector<Request> groups;  // 3 prompts x 4 samples, interleaved: g0 g1 g2 g0 g1 g2 ...
  for (int s = 0; s < 4; ++s)
    for (int g = 0; g < 3; ++g) {
      Request r = (*reqs_)[size_t(g)];
      r.id = int64_t(groups.size());
      r.sampling.temperature = 1.0;
      r.seed = 100 + uint64_t(r.id);
      groups.push_back(r);
    }
  EngineOptions each = plain_options(12);
  each.share_prompts = false;
  EngineStats each_st, shared_st;
  std::vector<Completion> plain_each = run(*target_, Drafter(nullptr), each, groups, &each_st);
  std::vector<Completion> plain_shared =
      run(*target_, Drafter(nullptr), plain_options(12), groups, &shared_st);
  expect_same_tokens(plain_shared, plain_each, "plain, prompts shared");
  EXPECT_EQ(each_st.prefill_positions, 4 * shared_st.prefill_positions);
  EXPECT_NE(plain_each[0].tokens, plain_each[3].tokens) << "a group's samples should differ";
  torch::manual_seed(5);
  Drafter drafter(*target_, 1);
  EngineOptions spec = spec_options(12, {"4_1_5", "ngram", "history"});
  spec.reproducible = true;
  expect_same_tokens(run(*target_, drafter, spec, groups), plain_each,
                     "speculative, prompts shared");
}

// "ngram_D" drafts at most D tokens a request ("ngram": 8), and stays exact.
TEST_F(GreedyExactness, NgramDepthCapsTheDraft) {
  auto drafted_per_request_step = [&](const char* arm) {
    EngineStats st;
    auto out = run(*target_, Drafter(nullptr), spec_options(5, {arm}), *reqs_, &st);
    expect_same_tokens(out, *plain_, arm);
    EXPECT_GT(st.accepted, 0) << arm;
    return double(st.drafted) / double(std::max<int64_t>(st.request_spec_steps, 1));
  };
  double two = drafted_per_request_step("ngram_2"), eight = drafted_per_request_step("ngram");
  std::printf("drafted tokens per request and step: ngram_2 %.2f, ngram %.2f\n", two, eight);
  EXPECT_LE(two, 2.0);
  // Requests without a recurring n-gram draft nothing, hence the averages; the cap must bind.
  EXPECT_GT(eight, 1.5 * two) << "the default n-gram arm should draft longer than ngram_2";
}

TEST_F(GreedyExactness, UntrainedDrafterEveryArmAndBatchSize) {
  torch::manual_seed(5);
  Drafter drafter(*target_, 1);
  drafter->eval();
  for (int64_t batch : {1, 5, 32}) {
    for (const char* arm : {"4_1_5", "3_3_8", "ngram"}) {
      EngineStats st;
      auto out = run(*target_, drafter, spec_options(batch, {arm}), *reqs_, &st);
      expect_same_tokens(out, *plain_, std::string(arm) + " batch " + std::to_string(batch));
      EXPECT_GT(st.spec_steps, 0);
    }
  }
}

// GRPO groups at every batch size: 8 prompts x 8 samples, queued sample by sample (g0 g1 .. g7
// g0 g1 ..), sample s of a group stopping 2s tokens short of the group's first. Greedy siblings
// write the same tokens, so a finished sibling's response holds all of a shorter one's: the
// history arm drafts from it and gets tokens accepted, and the output stays plain decoding's.
TEST_F(GreedyExactness, HistoryArmEveryBatchSize) {
  std::vector<Request> groups;
  for (int s = 0; s < 8; ++s) {
    for (int g = 0; g < 8; ++g) {
      Request r = (*reqs_)[size_t(g)];
      r.id = int64_t(groups.size());
      r.max_new_tokens -= 2 * s;
      groups.push_back(r);
    }
  }
  std::vector<Completion> plain = run(*target_, Drafter(nullptr), plain_options(32), groups);
  for (int64_t batch : {1, 5, 32}) {
    std::string what = "history batch " + std::to_string(batch);
    EngineStats st;
    auto out = run(*target_, Drafter(nullptr), spec_options(batch, {"history"}), groups, &st);
    expect_same_tokens(out, plain, what);
    std::printf("%s: accept length %.2f (%lld of %lld drafted accepted)\n", what.c_str(),
                st.accept_length(), (long long)st.accepted, (long long)st.drafted);
    EXPECT_GT(st.spec_steps, 0) << what;
    EXPECT_GT(st.accepted, 0) << what << ": no drafted token accepted";
    if (batch != 1) continue;
    // One at a time, every sample after a group's first has a longer sibling's response whole.
    for (size_t i = 8; i < groups.size(); ++i)
      EXPECT_GT(out[i].accepted, out[i].spec_steps) << what << ", request " << i;
  }
}

// GRPO groups: 8 prompts, 8 requests each. Greedy siblings write the same response, so once the
// first of a group has finished the later ones' history drafts are accepted whole; a second call
// with the same prompts drafts from the first call's responses from its first step.
TEST_F(GreedyExactness, HistoryDraftsFromFinishedSiblingsAndEarlierCalls) {
  std::vector<Request> groups;
  for (const Request& r : std::vector<Request>(reqs_->begin(), reqs_->begin() + 8)) {
    for (int s = 0; s < 8; ++s) {
      Request sibling = r;
      sibling.id = int64_t(groups.size());
      groups.push_back(sibling);
    }
  }
  std::vector<Completion> plain = run(*target_, Drafter(nullptr), plain_options(4), groups);
  auto engine = Engine::create(*target_, Drafter(nullptr), spec_options(4, {"history"}));
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  auto first = (*engine)->generate(groups);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  expect_same_tokens(*first, plain, "history, first call");
  EngineStats st = (*engine)->stats();
  std::printf("history first call: accept length %.2f (%lld of %lld drafted accepted)\n",
              st.accept_length(), (long long)st.accepted, (long long)st.drafted);
  // Each group's first four run before any sibling finished: nothing to draft from yet. The
  // other four draft their siblings' response and accept it.
  for (size_t i = 0; i < groups.size(); ++i) {
    const Completion& c = (*first)[i];
    if (i % 8 < 4) {
      EXPECT_EQ(c.accepted, 0) << i;
    } else {
      EXPECT_GT(c.accepted, 2 * c.spec_steps) << i << ": accept length > 3";
    }
  }
  (*engine)->reset_stats();
  auto second = (*engine)->generate(groups);
  ASSERT_TRUE(second.ok()) << second.status().to_string();
  expect_same_tokens(*second, plain, "history, second call");
  EngineStats again = (*engine)->stats();
  std::printf("history second call: accept length %.2f\n", again.accept_length());
  EXPECT_GT(again.accept_length(), st.accept_length()) << "earlier calls' responses must help";
  for (size_t i = 0; i < groups.size(); i += 8) EXPECT_GT((*second)[i].accepted, 0) << i;
}

TEST_F(GreedyExactness, TrainedDrafterWithBanditAndSwitching) {
  torch::manual_seed(6);
  Drafter drafter(*target_, 1);
  train_drafter(*target_, drafter, *reqs_, 300);
  EngineStats st;
  // Bandit over all arms; speculation only at <= 8 active requests, so the batch switches.
  auto out = run(*target_, drafter, spec_options(32, {"4_1_5", "6_2_8", "3_3_8", "ngram"}, 8),
                 *reqs_, &st);
  expect_same_tokens(out, *plain_, "bandit, threshold 8");
  EXPECT_GT(st.plain_steps, 0);
  EXPECT_GT(st.spec_steps, 0);
  for (int64_t batch : {1, 16}) {
    auto chain = run(*target_, drafter, spec_options(batch, {"6_1_7"}), *reqs_, &st);
    expect_same_tokens(chain, *plain_, "trained chain batch " + std::to_string(batch));
    EXPECT_GT(st.accept_length(), 1.5) << "a trained drafter should get tokens accepted";
    auto tree = run(*target_, drafter, spec_options(batch, {"4_3_12"}), *reqs_, &st);
    expect_same_tokens(tree, *plain_, "trained tree batch " + std::to_string(batch));
  }
}

TEST_F(GreedyExactness, CopiedDraftsMixWithDrafterDrafts) {
  // Drafts copied from a request's own context (ngram_shortcut) and the drafter's drafts, in the
  // same batch and alone: every combination must still give plain greedy's tokens.
  torch::manual_seed(5);
  Drafter drafter(*target_, 1);
  drafter->eval();
  struct Case {
    const char* arm;
    int64_t batch;
    int32_t shortcut;
  };
  for (Case c :
       {Case{"4_1_5", 1, 1}, Case{"4_1_5", 8, 3}, Case{"3_3_8", 1, 3}, Case{"3_3_8", 8, 1}}) {
    EngineOptions o = spec_options(c.batch, {c.arm});
    o.ngram_shortcut = c.shortcut;
    EngineStats st;
    auto out = run(*target_, drafter, o, *reqs_, &st);
    std::string what = std::string(c.arm) + " shortcut " + std::to_string(c.shortcut) + " batch " +
                       std::to_string(c.batch);
    expect_same_tokens(out, *plain_, what);
    EXPECT_GT(st.copied_drafts, 0) << what << ": the test must exercise copied drafts";
    EXPECT_LT(st.copied_drafts, st.request_spec_steps) << what << ": and drafter drafts";
  }
  // Off: the drafter drafts every request.
  EngineOptions o = spec_options(4, {"4_1_5"});
  o.ngram_shortcut = 0;
  EngineStats st;
  expect_same_tokens(run(*target_, drafter, o, *reqs_, &st), *plain_, "shortcut off");
  EXPECT_EQ(st.copied_drafts, 0);
}

TEST_F(GreedyExactness, DrafterCatchUpLimitSkipsPairsLosslessly) {
  // A catch-up limit leaves gaps in the drafter's context (prompts, plain steps above the
  // threshold, n-gram and copied drafts): drafts change, accepted tokens must not.
  torch::manual_seed(6);
  Drafter drafter(*target_, 1);
  train_drafter(*target_, drafter, *reqs_, 100);
  struct Case {
    int32_t limit;
    int64_t batch, threshold;
    std::vector<std::string> arms;
  };
  for (const Case& c : {Case{2, 32, 8, {"4_1_5", "3_3_8", "ngram"}}, Case{1, 1, 1000, {"6_1_7"}},
                        Case{4, 16, 1000, {"4_3_12"}}}) {
    EngineOptions o = spec_options(c.batch, c.arms, c.threshold);
    o.drafter_catch_up_limit = c.limit;
    EngineStats st;
    auto out = run(*target_, drafter, o, *reqs_, &st);
    std::string what = "catch-up limit " + std::to_string(c.limit) + " batch " +
                       std::to_string(c.batch) + " arm " + c.arms[0];
    expect_same_tokens(out, *plain_, what);
    EXPECT_GT(st.catch_up_skipped, 0) << what << ": the test must skip pairs";
    EngineStats full;
    o.drafter_catch_up_limit = 0;
    run(*target_, drafter, o, *reqs_, &full);
    std::printf("%s: accept length %.3f, unlimited %.3f, skipped %lld\n", what.c_str(),
                st.accept_length(), full.accept_length(), (long long)st.catch_up_skipped);
    // The drafter still drafts from what it has (a wrong cache slot or position would not).
    EXPECT_GT(st.accept_length(), 0.95 * full.accept_length()) << what;
  }
  EngineOptions unlimited = spec_options(16, {"4_1_5"});
  unlimited.drafter_catch_up_limit = 0;
  EngineStats st;
  run(*target_, drafter, unlimited, *reqs_, &st);
  EXPECT_EQ(st.catch_up_skipped, 0) << "no limit, nothing skipped";
}

TEST_F(GreedyExactness, DraftConfidenceCutsDraftsLosslessly) {
  // Chains end and trees lose nodes where the drafter is unsure: fewer tokens verified, a larger
  // share of them accepted, and the same output.
  torch::manual_seed(6);
  Drafter drafter(*target_, 1);
  train_drafter(*target_, drafter, *reqs_, 100);
  for (const char* arm : {"6_1_7", "4_3_12"}) {
    for (int64_t batch : {1, 16}) {
      EngineOptions o = spec_options(batch, {arm});
      o.ngram_shortcut = 0;  // every draft from the drafter
      EngineStats all, cut;
      run(*target_, drafter, o, *reqs_, &all);
      o.draft_confidence = 0.3;
      auto out = run(*target_, drafter, o, *reqs_, &cut);
      std::string what = std::string(arm) + " confidence 0.3 batch " + std::to_string(batch);
      expect_same_tokens(out, *plain_, what);
      double per_step_all = double(all.drafted) / all.request_spec_steps;
      double per_step_cut = double(cut.drafted) / cut.request_spec_steps;
      double kept_all = double(all.accepted) / all.drafted;
      double kept_cut = double(cut.accepted) / cut.drafted;
      std::printf("%s: drafted per request step %.2f -> %.2f, accepted share %.2f -> %.2f\n",
                  what.c_str(), per_step_all, per_step_cut, kept_all, kept_cut);
      EXPECT_LT(per_step_cut, 0.9 * per_step_all) << what << ": drafts must get shorter";
      EXPECT_GT(kept_cut, kept_all) << what << ": what is left is likelier to be accepted";
    }
  }
}

TEST_F(GreedyExactness, DraftVocabularySubset) {
  // The drafter proposes only the 16 tokens plain decoding produced most often (of 64); tokens
  // outside are never drafted, yet the target's verification keeps the output exact.
  std::vector<int64_t> counts(64, 0);
  for (const Completion& c : *plain_)
    for (int64_t t : c.tokens) ++counts[size_t(t)];
  torch::manual_seed(6);
  Drafter drafter(*target_, 1);
  train_drafter(*target_, drafter, *reqs_, 100);
  ASSERT_TRUE(drafter->set_draft_vocab(model::most_frequent_tokens(counts, 16)).ok());
  for (const char* arm : {"4_1_5", "3_3_8"}) {
    for (int64_t batch : {1, 16}) {
      EngineOptions o = spec_options(batch, {arm});
      o.ngram_shortcut = 0;  // every draft from the drafter
      EngineStats st;
      auto out = run(*target_, drafter, o, *reqs_, &st);
      std::string what = std::string(arm) + " subset batch " + std::to_string(batch);
      expect_same_tokens(out, *plain_, what);
      EXPECT_GT(st.accept_length(), 1.2) << what << ": drafts from the subset get accepted";
    }
  }
}

TEST_F(GreedyExactness, StopTokenEndsLikePlain) {
  // Stop on the token plain decoding produces most often (after the first two), so many
  // requests stop, some in the middle of an accepted draft.
  std::map<int64_t, int> freq;
  for (const Completion& c : *plain_) {
    for (size_t i = 2; i < c.tokens.size(); ++i) freq[c.tokens[i]]++;
  }
  int64_t stop = std::max_element(freq.begin(), freq.end(), [](auto& a, auto& b) {
                   return a.second < b.second;
                 })->first;
  std::vector<Request> reqs = *reqs_;
  for (Request& r : reqs) r.stop_token = stop;
  auto plain = run(*target_, Drafter(nullptr), plain_options(32), reqs);
  torch::manual_seed(5);
  Drafter drafter(*target_, 1);
  drafter->eval();
  auto spec = run(*target_, drafter, spec_options(8, {"4_1_5", "3_3_8"}), reqs);
  expect_same_tokens(spec, plain, "stop token");
  int stopped = 0;
  for (const Completion& c : plain) {
    stopped += c.stopped;
    if (c.stopped) {
      EXPECT_EQ(c.tokens.back(), stop);
    }
  }
  EXPECT_GT(stopped, 0) << "the test should exercise stopping";
}

TEST_F(GreedyExactness, WideTreeFitsItsDrafterHeadroom) {
  // A tree commits top_k nodes per expanded level to the drafter cache (8 x 7 = 56 here), more
  // than it verifies (16): a request must leave room for that, or be refused up front.
  torch::manual_seed(5);
  Drafter drafter(*target_, 1);
  drafter->eval();
  std::vector<Request> reqs(reqs_->begin(), reqs_->begin() + 4);
  for (Request& r : reqs) r.max_new_tokens = 128 - int(r.prompt.size()) - 30;
  auto engine = Engine::create(*target_, drafter, spec_options(4, {"8_8_16"}));
  ASSERT_TRUE(engine.ok());
  EXPECT_EQ((*engine)->generate(reqs).status().code(), StatusCode::kInvalidArgument);
  for (Request& r : reqs) r.max_new_tokens = 128 - int(r.prompt.size()) - 66;
  auto plain = run(*target_, Drafter(nullptr), plain_options(4), reqs);
  auto spec = run(*target_, drafter, spec_options(4, {"8_8_16"}), reqs);
  expect_same_tokens(spec, plain, "8_8_16 at the edge of max_seq");
}

TEST_F(GreedyExactness, RequestTooLongIsRefused) {
  std::vector<Request> reqs = {(*reqs_)[0]};
  reqs[0].max_new_tokens = 500;
  auto engine = Engine::create(*target_, Drafter(nullptr), plain_options(4));
  ASSERT_TRUE(engine.ok());
  auto out = (*engine)->generate(reqs);
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
}

TEST_F(GreedyExactness, UnknownSelectorValueIsRefused) {
  EngineOptions o = plain_options(4);
  o.selector_value = "mean";
  auto engine = Engine::create(*target_, Drafter(nullptr), o);
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(engine.status().message().find("throughput or median"), std::string::npos)
      << engine.status().message();
}

TEST_F(GreedyExactness, NonPositiveCouplingNoiseIsRefused) {
  for (double noise : {0.0, -1.0, std::nan("")}) {
    EngineOptions o = plain_options(4);
    o.coupling_noise = noise;
    auto engine = Engine::create(*target_, Drafter(nullptr), o);
    ASSERT_FALSE(engine.ok()) << noise;
    EXPECT_NE(engine.status().message().find("coupling_noise must be a positive"),
              std::string::npos)
        << engine.status().message();
  }
}

TEST_F(GreedyExactness, UnknownSelectorExplorationIsRefused) {
  EngineOptions o = plain_options(4);
  o.selector_exploration = "softmax";
  auto engine = Engine::create(*target_, Drafter(nullptr), o);
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(engine.status().message().find("uniform or weighted"), std::string::npos)
      << engine.status().message();
}

// ---- bfloat16 decoding ---------------------------------------------------------------------

// A float32 target (bfloat16 products keep float32 activations) with 32-wide heads.
Transformer make_float32_target(int64_t vocab, uint64_t seed, double head_scale) {
  torch::manual_seed(seed);
  ModelConfig c = small_config(vocab);
  c.dim = 128, c.ffn = 256;
  Transformer t(c);
  torch::NoGradGuard g;
  t->lm_head->weight.mul_(head_scale);
  t->eval();
  return t;
}

EngineOptions with_bfloat16(EngineOptions o) {
  o.bfloat16 = true;
  return o;
}

// With products in bfloat16 every arm still reproduces plain decoding token for token, greedy
// and sampled (RL's reproducible mode), at any batch size: the forward is row-invariant, so a
// verify forward and a one-token step agree to the bit. Skipped where bfloat16 is emulated.
TEST(Bfloat16Decoding, EveryArmAndBatchSizeEqualsPlainDecoding) {
  if (!model::native_bfloat16(torch::kCPU)) GTEST_SKIP() << "no native bfloat16 on this CPU";
  Transformer target = make_float32_target(64, 12, 4.0);
  torch::manual_seed(13);
  Drafter drafter(target, 1);
  drafter->eval();
  for (double temperature : {0.0, 1.0}) {
    std::vector<Request> reqs = random_requests(64, 64, 32, temperature, 17);
    EngineStats st;
    std::vector<Completion> plain =
        run(target, Drafter(nullptr), with_bfloat16(plain_options(32)), reqs, &st);
    ASSERT_TRUE(st.bfloat16) << "the engine's probe refused bfloat16 decoding: " << st.precision;
    EXPECT_NE(st.precision.find("on cpu"), std::string::npos) << st.precision;
    std::vector<Completion> float32 = run(target, Drafter(nullptr), plain_options(32), reqs);
    int changed = 0;
    for (size_t i = 0; i < reqs.size(); ++i) changed += plain[i].tokens != float32[i].tokens;
    std::printf("temperature %.0f: bfloat16 products changed %d of %zu responses\n", temperature,
                changed, reqs.size());
    for (int64_t batch : {1, 5, 32}) {
      for (const char* arm : {"4_1_5", "3_3_8", "ngram", "history"}) {
        EngineOptions o = with_bfloat16(spec_options(batch, {arm}));
        o.reproducible = true;
        auto out = run(target, drafter, o, reqs, &st);
        std::string what = std::string(arm) + " batch " + std::to_string(batch) + " temperature " +
                           std::to_string(int(temperature));
        expect_same_tokens(out, plain, what);
        EXPECT_GT(st.spec_steps, 0) << what;
        EXPECT_TRUE(st.bfloat16) << what;
      }
    }
  }
}

// ---- sampling distribution ------------------------------------------------------------------

TEST(ChiSquare, PValueMatchesKnownValues) {
  EXPECT_NEAR(gamma_q(0.5, 3.841 / 2), 0.05, 1e-3);   // df 1
  EXPECT_NEAR(gamma_q(5.0, 18.307 / 2), 0.05, 1e-3);  // df 10
  EXPECT_NEAR(gamma_q(5.0, 2.558 / 2), 0.99, 1e-3);
}

class SamplingDistribution : public ::testing::Test {
 protected:
  static constexpr int kN = 3000;
  static void SetUpTestSuite() {
    target_ = new Transformer(make_target(16, 21, 8.0));
    torch::manual_seed(22);
    drafter_ = new Drafter(*target_, 1);
    (*drafter_)->eval();
    // The same prompt many times, each request with its own seed.
    reqs_ = new std::vector<Request>();
    for (int i = 0; i < kN; ++i) {
      Request r;
      r.id = i;
      r.prompt = {3, 1, 4, 1, 5};
      r.max_new_tokens = 4;
      r.sampling.temperature = 1.0;
      r.seed = 100000 + i;
      reqs_->push_back(r);
    }
    plain_ =
        new std::vector<Completion>(run(*target_, Drafter(nullptr), plain_options(64), *reqs_));
    std::vector<Request> other = *reqs_;
    for (Request& r : other) r.seed += 7777777;
    plain2_ =
        new std::vector<Completion>(run(*target_, Drafter(nullptr), plain_options(64), other));
  }
  static void TearDownTestSuite() {
    delete target_;
    delete drafter_;
    delete reqs_;
    delete plain_;
    delete plain2_;
  }
  static Transformer* target_;
  static Drafter* drafter_;
  static std::vector<Request>* reqs_;
  static std::vector<Completion>* plain_;
  static std::vector<Completion>* plain2_;
};
Transformer* SamplingDistribution::target_ = nullptr;
Drafter* SamplingDistribution::drafter_ = nullptr;
std::vector<Request>* SamplingDistribution::reqs_ = nullptr;
std::vector<Completion>* SamplingDistribution::plain_ = nullptr;
std::vector<Completion>* SamplingDistribution::plain2_ = nullptr;

// Each of tokens 1-3 of `spec` follows plain sampling's distribution (p > 1e-3); `what` and
// `detail` label the printed p-values.
void expect_like_plain(const std::vector<Completion>& plain, const std::vector<Completion>& spec,
                       const std::string& what, const std::string& detail) {
  for (size_t pos : {1, 2, 3}) {
    double p = homogeneity_p(plain, spec, pos);
    std::printf("%s: token %zu p=%.4f (%s)\n", what.c_str(), pos, p, detail.c_str());
    EXPECT_GT(p, 1e-3) << what << " token " << pos << " p=" << p;
  }
}

std::string accept_detail(const EngineStats& st) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "accept length %.2f", st.accept_length());
  return buf;
}

// The share of `c`'s responses that equal an earlier one exactly.
double repeated_share(const std::vector<Completion>& c) {
  std::set<std::vector<int64_t>> seen;
  double repeats = 0;
  for (const Completion& x : c) repeats += seen.insert(x.tokens).second ? 0 : 1;
  return repeats / double(c.size());
}

// Two-proportion z-test that `a` and `b` repeat earlier responses equally often (independent
// samples of one distribution do): the p-value. Requests that copy each other's responses
// repeat more, though each response alone may follow the right distribution.
double repeats_p(const std::vector<Completion>& a, const std::vector<Completion>& b) {
  double na = double(a.size()), nb = double(b.size());
  double pa = repeated_share(a), pb = repeated_share(b), pooled = (pa * na + pb * nb) / (na + nb);
  double se = std::sqrt(pooled * (1 - pooled) * (1 / na + 1 / nb));
  return se > 0 ? std::erfc(std::fabs(pa - pb) / se / std::sqrt(2.0)) : (pa == pb ? 1.0 : 0.0);
}

// Goodness of fit of `counts` (token -> observations) to `probs` (V,): cells expected below 5
// are merged into one. Returns the chi-square p-value.
double fit_p(const std::map<int64_t, double>& counts, const torch::Tensor& probs) {
  double n = 0;
  for (const auto& [tok, c] : counts) n += c;
  std::vector<std::pair<double, double>> cells;  // (observed, expected)
  std::pair<double, double> rare{0, 0};
  for (int64_t v = 0; v < probs.size(0); ++v) {
    double e = n * probs[v].item<double>();
    double o = counts.count(v) ? counts.at(v) : 0.0;
    if (e < 5) {
      rare.first += o, rare.second += e;
    } else {
      cells.push_back({o, e});
    }
  }
  if (rare.second > 0) cells.push_back(rare);
  double stat = 0;
  for (auto [o, e] : cells) stat += (o - e) * (o - e) / e;
  double df = double(cells.size()) - 1;
  return df < 1 ? 1.0 : gamma_q(df / 2, stat / 2);
}

// The model's next-token distribution after `context`, by one full forward with positions from
// 0, as the GRPO trainer computes its log-probabilities (runtime/rl/sequences.h): (V,).
torch::Tensor next_token_probs(Transformer& model, const std::vector<int64_t>& context) {
  torch::NoGradGuard g;
  int64_t t = int64_t(context.size());
  torch::Tensor tokens = torch::tensor(context, torch::kInt64).view({1, t});  // (1, T)
  torch::Tensor positions = torch::arange(t, torch::kInt64).view({1, t});     // (1, T)
  torch::Tensor logits = model->forward(tokens, positions).logits;            // (1, T, V)
  return torch::softmax(logits[0][t - 1], -1);                                // (V,)
}

// Plain sampling draws from the model's own softmax, in a ragged batch of two prompts that join
// and leave together: RL's policy gradient is unbiased only if the rollout samples exactly the
// distribution the trainer differentiates. Checked at the first and (given the commonest first
// token) the second response position.
TEST_F(SamplingDistribution, PlainSamplingFollowsTheModelsSoftmax) {
  const std::vector<std::vector<int64_t>> prompts = {{3, 1, 4, 1, 5}, {2, 7}};
  std::vector<Request> reqs;
  for (int i = 0; i < 2 * kN; ++i) {
    Request r;
    r.id = i;
    r.prompt = prompts[size_t(i % 2)];
    r.max_new_tokens = 2;
    r.sampling.temperature = 1.0;
    r.seed = 500000 + i;
    reqs.push_back(r);
  }
  std::vector<Completion> out = run(*target_, Drafter(nullptr), plain_options(64), reqs);
  for (size_t k = 0; k < prompts.size(); ++k) {
    std::map<int64_t, double> first;
    for (size_t i = k; i < out.size(); i += 2) first[out[i].tokens.at(0)]++;
    double p0 = fit_p(first, next_token_probs(*target_, prompts[k]));
    int64_t t0 = std::max_element(first.begin(), first.end(), [](auto& a, auto& b) {
                   return a.second < b.second;
                 })->first;
    std::map<int64_t, double> second;
    for (size_t i = k; i < out.size(); i += 2)
      if (out[i].tokens.at(0) == t0 && out[i].tokens.size() > 1) second[out[i].tokens[1]]++;
    std::vector<int64_t> context = prompts[k];
    context.push_back(t0);
    double p1 = fit_p(second, next_token_probs(*target_, context));
    std::printf("prompt %zu: first token p=%.4f, second after %lld p=%.4f\n", k, p0, (long long)t0,
                p1);
    EXPECT_GT(p0, 1e-3) << "prompt " << k;
    EXPECT_GT(p1, 1e-3) << "prompt " << k;
  }
}

TEST_F(SamplingDistribution, PlainAgainstPlainPasses) {
  for (size_t pos : {1, 2, 3}) EXPECT_GT(homogeneity_p(*plain_, *plain2_, pos), 1e-3) << pos;
  EXPECT_GT(repeats_p(*plain_, *plain2_), 1e-3);
}

TEST_F(SamplingDistribution, RejectionChainMatchesPlain) {
  EngineStats st;
  auto spec = run(*target_, *drafter_, spec_options(64, {"3_1_4"}), *reqs_, &st);
  EXPECT_GT(st.accepted, kN / 10)
      << "the drafter must get tokens accepted for the test to mean anything";
  expect_like_plain(*plain_, spec, "rejection chain", accept_detail(st));
}

TEST_F(SamplingDistribution, RejectionChainWithCopiedDraftsMatchesPlain) {
  // Shortcut 1: a request whose last token occurred before verifies a copied draft by sampling;
  // the others verify the drafter's sampled chain by rejection, in the same step.
  EngineOptions o = spec_options(64, {"3_1_4"});
  o.ngram_shortcut = 1;
  EngineStats st;
  auto spec = run(*target_, *drafter_, o, *reqs_, &st);
  EXPECT_GT(st.copied_drafts, st.request_spec_steps / 10) << "copied drafts must be common";
  EXPECT_LT(st.copied_drafts, st.request_spec_steps) << "and so must the drafter's";
  expect_like_plain(
      *plain_, spec, "chain + copied drafts",
      std::to_string(st.copied_drafts) + " copied of " + std::to_string(st.request_spec_steps));
}

TEST_F(SamplingDistribution, RejectionChainOverDraftVocabularyMatchesPlain) {
  // The drafter samples from 6 of the 16 tokens (q is 0 elsewhere); rejection sampling's
  // residual must then supply the other tokens with exactly the target's probability.
  torch::manual_seed(22);
  Drafter drafter(*target_, 1);
  drafter->eval();
  ASSERT_TRUE(
      drafter->set_draft_vocab(torch::tensor(std::vector<int64_t>{0, 2, 3, 5, 8, 13})).ok());
  EngineOptions o = spec_options(64, {"3_1_4"});
  o.ngram_shortcut = 0;
  EngineStats st;
  auto spec = run(*target_, drafter, o, *reqs_, &st);
  EXPECT_GT(st.accepted, kN / 20) << "drafts must get accepted for the test to mean anything";
  expect_like_plain(*plain_, spec, "chain over 6 draft tokens", accept_detail(st));
}

// Reproducible coupled chains over a draft vocabulary race over its tokens alone (keyed by token
// id); the outputs must still be plain sampling's token for token.
TEST_F(SamplingDistribution, CoupledChainOverDraftVocabularyEqualsPlainSampling) {
  torch::manual_seed(22);
  Drafter drafter(*target_, 1);
  drafter->eval();
  ASSERT_TRUE(
      drafter->set_draft_vocab(torch::tensor(std::vector<int64_t>{13, 0, 2, 3, 5, 8})).ok());
  EngineOptions o = spec_options(64, {"3_1_4"});
  o.ngram_shortcut = 0;
  o.reproducible = true;
  EngineStats st;
  auto spec = run(*target_, drafter, o, *reqs_, &st);
  EXPECT_GT(st.accepted, kN / 20) << "drafts must get accepted for the test to mean anything";
  expect_same_tokens(spec, *plain_, "coupled chain over 6 draft tokens");
}

TEST_F(SamplingDistribution, RejectionChainAfterCatchUpGapsMatchesPlain) {
  // Limit 1: the drafter sees only the prompt's last pair, so its q differs from an unlimited
  // run's; rejection sampling against that q must still give the target's distribution.
  EngineOptions o = spec_options(64, {"3_1_4"});
  o.ngram_shortcut = 0;
  o.drafter_catch_up_limit = 1;
  EngineStats st;
  auto spec = run(*target_, *drafter_, o, *reqs_, &st);
  EXPECT_GE(st.catch_up_skipped, 4 * kN) << "each prompt's first four pairs are skipped";
  EXPECT_GT(st.accepted, kN / 10) << "drafts must get accepted for the test to mean anything";
  expect_like_plain(*plain_, spec, "chain after catch-up gaps", accept_detail(st));
}

TEST_F(SamplingDistribution, RejectionChainCutByConfidenceMatchesPlain) {
  // The chain's end depends on the drafter's distributions only, never on the token it drew,
  // so rejection sampling stays exact. Cutting after an unlikely draw would not be: at this
  // confidence that rule gave token 1 p=6e-16 here.
  EngineOptions o = spec_options(64, {"3_1_4"});
  o.ngram_shortcut = 0;
  EngineStats all, st;
  run(*target_, *drafter_, o, *reqs_, &all);
  o.draft_confidence = 0.05;
  auto spec = run(*target_, *drafter_, o, *reqs_, &st);
  double per_step_all = double(all.drafted) / all.request_spec_steps;
  double per_step = double(st.drafted) / st.request_spec_steps;
  EXPECT_LT(per_step, 0.9 * per_step_all) << "the confidence must cut chains";
  EXPECT_GT(st.accepted, kN / 10) << "drafts must get accepted for the test to mean anything";
  char detail[80];
  std::snprintf(detail, sizeof detail, "drafted %.2f of %.2f per step", per_step, per_step_all);
  expect_like_plain(*plain_, spec, "chain cut at confidence 0.05", detail);
}

TEST_F(SamplingDistribution, TreeAndNgramMatchPlain) {
  for (const char* arm : {"3_3_8", "ngram"}) {
    auto spec = run(*target_, *drafter_, spec_options(64, {arm}), *reqs_);
    // Deterministic drafts verified by sampling draw one uniform per emitted token from the
    // request's RNG, exactly as plain sampling does, so with the same seeds the outputs are not
    // only alike in distribution but identical.
    expect_same_tokens(spec, *plain_, std::string(arm) + " sampled, same seeds");
    expect_like_plain(*plain_, spec, arm, "same seeds");
  }
}

TEST_F(SamplingDistribution, HistoryMatchesPlain) {
  // Every request shares one prompt: the finished ones are the running ones' history.
  EngineStats st;
  auto spec = run(*target_, Drafter(nullptr), spec_options(64, {"history"}), *reqs_, &st);
  EXPECT_GT(st.accepted, kN / 10)
      << "history drafts must get accepted for the test to mean anything";
  expect_same_tokens(spec, *plain_, "history sampled, same seeds");
  expect_like_plain(*plain_, spec, "history", accept_detail(st));
  EXPECT_GT(repeats_p(*plain_, spec), 1e-3) << "requests must not copy their siblings";
}

TEST_F(SamplingDistribution, BrokenRuleOnHistoryDraftsIsCaught) {
  EngineOptions o = spec_options(64, {"history"});
  // Wrong: trusts the history, accepting every node along the first branch. A sibling's
  // continuation of the same context is itself a draw from the target, so each response alone
  // still looks right (the first tokens' chi-square cannot tell); but requests copy each other,
  // so far more responses repeat an earlier one than independent samples do.
  o.tree_rule = [](const DraftTree& tree, const NodeLogits& logits, const SamplingParams& params,
                   Rng& rng) {
    Verdict v{{0}, 0};
    for (int32_t i = 1; i < tree.size(); ++i)
      if (tree.node(i).parent == v.path.back()) v.path.push_back(i);
    v.next_token = sample(sampling_probs(logits.row(v.path.back()), logits.vocab, params), rng);
    return v;
  };
  EngineStats st;
  auto broken = run(*target_, Drafter(nullptr), o, *reqs_, &st);
  EXPECT_GT(st.accepted, kN / 10) << "the broken rule must see drafts to be caught";
  double p = repeats_p(*plain_, broken);
  std::printf("broken rule on history drafts: repeated responses %.3f vs plain %.3f, p=%.3g\n",
              repeated_share(broken), repeated_share(*plain_), p);
  EXPECT_LT(p, 1e-6) << "the test must notice a lossy rule";
}

TEST_F(SamplingDistribution, ReproducibleChainEqualsPlainSampling) {
  // RL's mode: chains drafted with the drafter's top-1 and verified by sampling reproduce plain
  // sampling token for token for the same seeds, whatever arm the bandit picks.
  EngineOptions o = spec_options(64, {"3_1_4", "ngram"});
  o.reproducible = true;
  o.selector = "bucketed-epsilon-greedy";
  EngineStats st;
  auto spec = run(*target_, *drafter_, o, *reqs_, &st);
  EXPECT_GT(st.accepted, 0) << "speculation must accept tokens for the test to mean anything";
  expect_same_tokens(spec, *plain_, "reproducible chain, same seeds");
}

// Coupled drafts (EngineOptions::coupled_drafts): a reproducible chain's draft at depth k is the
// drafter's own sample at the uniform the target will draw that position with. Outputs stay plain
// sampling's token for token, and the drafts agree with the target's draws more often than the
// drafter's top token does, because a trained drafter's distribution is close to the target's.
TEST_F(SamplingDistribution, CoupledDraftsAcceptMoreAndStillEqualPlainSampling) {
  torch::manual_seed(23);
  Drafter trained(*target_, 1);
  train_drafter(*target_, trained, std::vector<Request>(reqs_->begin(), reqs_->begin() + 64), 300);
  auto accepted = [&](bool coupled) {
    EngineOptions o = spec_options(64, {"3_1_4"});
    o.reproducible = true;
    o.coupled_drafts = coupled;
    EngineStats st;
    auto spec = run(*target_, trained, o, *reqs_, &st);
    expect_same_tokens(spec, *plain_, coupled ? "coupled drafts" : "top-1 drafts");
    std::printf("%s: %lld of %lld drafted tokens accepted\n", coupled ? "coupled" : "top-1",
                (long long)st.accepted, (long long)st.drafted);
    return double(st.accepted) / double(std::max<int64_t>(st.drafted, 1));
  };
  double top1 = accepted(false), coupled = accepted(true);
  EXPECT_GT(coupled, top1 + 0.05) << "coupling should raise the accepted share of drafts";
}

// Coupled trees: a sampled request's tree children are the first top-k tokens of the drafter's
// own race at the key the target draws their depth with, instead of the drafter's likeliest
// tokens. Outputs stay plain sampling's token for token (reproducible or not: trees are verified
// by sampling either way), and a trained drafter's trees are accepted further.
TEST_F(SamplingDistribution, CoupledTreesAcceptMoreAndStillEqualPlainSampling) {
  torch::manual_seed(23);
  Drafter trained(*target_, 1);
  train_drafter(*target_, trained, std::vector<Request>(reqs_->begin(), reqs_->begin() + 64), 300);
  auto accept_length = [&](bool coupled, bool reproducible) {
    EngineOptions o = spec_options(64, {"3_2_6"});
    o.reproducible = reproducible;
    o.coupled_drafts = coupled;
    EngineStats st;
    auto spec = run(*target_, trained, o, *reqs_, &st);
    std::string what = std::string(coupled ? "coupled" : "top-k") + " trees, reproducible " +
                       (reproducible ? "1" : "0");
    expect_same_tokens(spec, *plain_, what);
    std::printf("%s: accept length %.3f over %lld request steps\n", what.c_str(),
                st.accept_length(), (long long)st.request_spec_steps);
    return st.accept_length();
  };
  double top_k = accept_length(false, true), coupled = accept_length(true, true);
  EXPECT_GT(coupled, top_k + 0.3) << "coupling should lengthen what a tree gets accepted";
  EXPECT_NEAR(accept_length(true, false), coupled, 1e-9)
      << "trees draft and verify the same way whether or not the engine is reproducible";
}

TEST(RaceValues, SmallestIsTheRaceWinnerAndZerosNeverRun) {
  Rng rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<double> p(37);
    double z = 0;
    for (size_t i = 0; i < p.size(); ++i) z += p[i] = (i % 5 == 0) ? 0.0 : rng.uniform();
    for (double& x : p) x /= z;
    std::vector<int64_t> ids(p.size());
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = int64_t(1000 + 7 * i);
    uint64_t key = rng.key();
    std::vector<double> plain = race_values(p, key), keyed = race_values(p, key, ids.data());
    auto smallest = [](const std::vector<double>& v) {
      return int64_t(std::min_element(v.begin(), v.end()) - v.begin());
    };
    EXPECT_EQ(smallest(plain), race(p, key));
    EXPECT_EQ(smallest(keyed), race(p, key, ids.data()));
    for (size_t i = 0; i < p.size(); i += 5) EXPECT_TRUE(std::isinf(plain[i]));
  }
}

TEST_F(SamplingDistribution, BrokenAcceptanceRuleIsCaught) {
  EngineOptions o = spec_options(64, {"3_1_4"});
  // Wrong: accepts every drafted token, so outputs follow the drafter, not the target.
  o.chain_rule = [](const DraftTree& chain, const NodeLogits& logits,
                    const std::vector<std::vector<double>>&, const SamplingParams& params,
                    Rng& rng) {
    Verdict v;
    for (int32_t k = 0; k < chain.size(); ++k) v.path.push_back(k);
    v.next_token = sample(sampling_probs(logits.row(chain.size() - 1), logits.vocab, params), rng);
    return v;
  };
  auto broken = run(*target_, *drafter_, o, *reqs_);
  double worst = 1.0;
  for (size_t pos : {1, 2}) worst = std::min(worst, homogeneity_p(*plain_, broken, pos));
  std::printf("broken rule: smallest p=%.3g\n", worst);
  EXPECT_LT(worst, 1e-6) << "the test must notice a lossy rule";
}

}  // namespace
}  // namespace tlt::rollout
