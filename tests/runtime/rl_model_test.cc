// An RL policy from spec.model.path: the model's own tokenizer behind the RL Codec interface
// (runtime/rl/model_codec.h) on the tiny random llama of tests/models/fixtures (a ChatML template,
// <|im_end|> and <|endoftext|> as end tokens), the ASCII codec unchanged behind the same
// interface, and greedy rollouts of the pretrained policy equal with speculation on and off.
#include <gtest/gtest.h>

#include <iostream>

#include "runtime/model/drafter.h"
#include "runtime/model/model_source.h"
#include "runtime/model/pretrained.h"
#include "runtime/rl/evaluation.h"
#include "runtime/rl/grpo.h"
#include "runtime/rl/model_codec.h"
#include "runtime/rl/sequences.h"
#include "runtime/rl/tasks.h"
#include "runtime/rollout/engine.h"
#include "tests/runtime/model_fixtures.h"

namespace tlt::rl {
namespace {

const std::string kLlama = testing::kModelFixtures + "/tiny-llama-hf";

std::unique_ptr<ModelCodec> llama_codec() {
  StatusOr<model::ModelSource> source = model::resolve_model_source(kLlama, "auto");
  EXPECT_TRUE(source.ok()) << source.status().message();
  StatusOr<std::unique_ptr<ModelCodec>> codec = ModelCodec::load(*source, 64);
  EXPECT_TRUE(codec.ok()) << codec.status().message();
  return std::move(*codec);
}

std::unique_ptr<Task> arithmetic() {
  StatusOr<std::unique_ptr<Task>> task = make_task("arithmetic-cot", 1);
  return std::move(*task);
}

TEST(RlCodec, AsciiCodecIsTheTextCodec) {
  const Codec& c = ascii_codec();
  EXPECT_EQ(*c.encode("7 + 5 = 12\xc3\xa9"), encode_text("7 + 5 = 12\xc3\xa9"));
  EXPECT_EQ(*c.encode_prompt("Compute: 1 + 2\n", "ignored"), encode_text("Compute: 1 + 2\n"));
  EXPECT_EQ(*c.decode({int64_t('4'), int64_t('2'), kEndOfText, int64_t('9')}), "42");
  EXPECT_EQ(c.end_ids(), std::vector<int64_t>{kEndOfText});
  EXPECT_EQ(c.vocab_size(), kTextVocab);
  EXPECT_FALSE(c.has_chat());
}

TEST(RlCodec, ModelCodecRendersTheChatTemplateAndStopsOnEndTokens) {
  std::unique_ptr<ModelCodec> codec = llama_codec();
  ASSERT_TRUE(codec);
  EXPECT_TRUE(codec->has_chat());
  EXPECT_EQ(codec->vocab_size(), 64);
  const std::vector<int64_t>& ends = codec->end_ids();
  EXPECT_NE(std::find(ends.begin(), ends.end(), 1), ends.end()) << "<|im_end|> is id 1";
  // The chat rendering wraps the user turn: <|im_end|> (id 1) closes it.
  std::vector<int64_t> chat = *codec->encode_prompt("1+2=", "3*4=");
  std::vector<int64_t> user = *codec->encode("3*4=");
  EXPECT_GT(chat.size(), user.size());
  EXPECT_NE(std::find(chat.begin(), chat.end(), 1), chat.end());
  EXPECT_NE(std::search(chat.begin(), chat.end(), user.begin(), user.end()), chat.end());
  // '3' '+' '4' then <|im_end|>: the response ends there.
  std::vector<int64_t> ids = *codec->encode("3+4");
  ids.push_back(1);
  ids.push_back(20);
  EXPECT_EQ(*codec->decode(ids), "3+4");
  EXPECT_FALSE(codec->decode({64}).ok()) << "an id outside the model's vocabulary";
}

TEST(RlCodec, TasksAskChatModelsForTheAnswerLine) {
  std::unique_ptr<Task> task = arithmetic();
  Problem p = task->problem(0, false);
  EXPECT_EQ(task->chat_prompt(p).rfind(p.prompt, 0), 0u);
  EXPECT_NE(task->chat_prompt(p).find("Answer:"), std::string::npos);
  EXPECT_EQ(*prompt_ids(ascii_codec(), *task, p), encode_text(p.prompt));
}

TEST(RlFromModel, GreedySpeculationEqualsPlainDecoding) {
  StatusOr<model::PretrainedModel> m = model::load_pretrained(kLlama);
  ASSERT_TRUE(m.ok()) << m.status().message();
  std::unique_ptr<ModelCodec> codec = llama_codec();
  ASSERT_TRUE(codec);
  std::unique_ptr<Task> task = arithmetic();
  torch::manual_seed(5);
  model::Drafter drafter(m->model, 1);
  ASSERT_TRUE(drafter->set_draft_vocab(torch::arange(16, torch::kInt64)).ok());  // vocabSubset
  std::vector<rollout::Request> reqs;
  for (int64_t i = 0; i < 6; ++i) {
    rollout::Request r;
    r.id = i;
    r.prompt = *prompt_ids(*codec, *task, task->problem(uint64_t(i), true));
    r.max_new_tokens = 24;
    set_stop_tokens(*codec, &r);
    r.sampling.temperature = 0;
    reqs.push_back(r);
  }
  torch::NoGradGuard no_grad;
  auto run = [&](bool speculative, rollout::EngineStats* stats) {
    rollout::EngineOptions eo;
    eo.max_batch = 6, eo.max_seq = 128, eo.speculative = speculative;
    eo.activation_threshold = 6, eo.arms = {"4_1_5", "ngram"};
    auto engine = rollout::Engine::create(m->model, drafter, eo);
    EXPECT_TRUE(engine.ok()) << engine.status().message();
    auto out = (*engine)->generate(reqs);
    EXPECT_TRUE(out.ok()) << out.status().message();
    *stats = (*engine)->stats();
    return *out;
  };
  rollout::EngineStats plain_stats, spec_stats;
  std::vector<rollout::Completion> plain = run(false, &plain_stats);
  std::vector<rollout::Completion> spec = run(true, &spec_stats);
  ASSERT_EQ(plain.size(), spec.size());
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_EQ(plain[i].tokens, spec[i].tokens) << i;
  std::cout << "speculative steps " << spec_stats.spec_steps << ", accepted " << spec_stats.accepted
            << " of " << spec_stats.drafted << " drafted\n";
  EXPECT_GT(spec_stats.spec_steps, 0);
}

// The policy update's log-probabilities (LM head on response positions only, a few rows of logits
// at a time, recomputed in the backward) equal the plain (B, T-1, V) log_softmax and its gradient,
// in float64 on the tiny llama (tied head) at a sampling temperature.
TEST(RlFromModel, ChunkedLogprobsAndGradientsEqualTheFullLogSoftmax) {
  StatusOr<model::PretrainedModel> m = model::load_pretrained(kLlama);
  ASSERT_TRUE(m.ok()) << m.status().message();
  model::Transformer policy = m->model;
  policy->to(torch::kFloat64);
  int64_t v = policy->config().vocab;
  torch::manual_seed(3);
  std::vector<std::vector<int64_t>> prompts, responses;
  for (int64_t i = 0; i < 4; ++i) {
    torch::Tensor p = torch::randint(v, {3 + i}, torch::kInt64);      // (3+i,)
    torch::Tensor r = torch::randint(v, {7 - 2 * i}, torch::kInt64);  // (7-2i,)
    prompts.emplace_back(p.data_ptr<int64_t>(), p.data_ptr<int64_t>() + p.numel());
    responses.emplace_back(r.data_ptr<int64_t>(), r.data_ptr<int64_t>() + r.numel());
  }
  SequenceBatch batch = make_batch(prompts, responses);
  torch::Tensor weights = torch::randn(batch.mask.sizes(), torch::kFloat64);  // (B, T-1)
  const double temperature = 0.7;
  auto grads = [&](const torch::Tensor& logp) {
    policy->zero_grad();
    (logp * batch.mask * weights).sum().backward();
    std::vector<torch::Tensor> out;
    for (const auto& p : policy->parameters()) out.push_back(p.grad().clone());
    return out;
  };
  int64_t t = batch.tokens.size(1);
  torch::Tensor positions = torch::arange(t - 1, torch::kInt64).unsqueeze(0).expand({4, t - 1});
  torch::Tensor logits = policy->forward(batch.tokens.narrow(1, 0, t - 1), positions).logits;
  torch::Tensor full = token_logprobs(logits / temperature, batch.targets) * batch.mask;
  std::vector<torch::Tensor> g_full = grads(full);
  // 3 rows of logits per chunk: the 4 rows' 13 response positions take 5 chunks.
  torch::Tensor chunked = sequence_logprobs(policy, batch, temperature, 3 * v);
  std::vector<torch::Tensor> g_chunked = grads(chunked);
  double maxdiff = (chunked - full).abs().max().item<double>(), gdiff = 0.0;
  for (size_t i = 0; i < g_full.size(); ++i)
    gdiff = std::max(gdiff, (g_chunked[i] - g_full[i]).abs().max().item<double>());
  std::cout << "log-probs maxdiff " << maxdiff << ", gradients maxdiff " << gdiff << "\n";
  EXPECT_LT(maxdiff, 1e-10);
  EXPECT_LT(gdiff, 1e-10);
  EXPECT_EQ((chunked * (1 - batch.mask)).abs().sum().item<double>(), 0.0) << "0 off the mask";
  // With room for all logits (the default budget here), the one plain log_softmax.
  EXPECT_TRUE(sequence_logprobs(policy, batch, temperature).equal(full));
  EXPECT_GT(full.abs().sum().item<double>(), 1.0);
  EXPECT_GT(g_full.back().abs().sum().item<double>(), 0.0);
}

}  // namespace
}  // namespace tlt::rl
