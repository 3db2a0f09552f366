#include "runtime/rl/evaluation.h"

#include <algorithm>

#include "runtime/rl/text.h"
#include "runtime/rollout/engine.h"

namespace tlt::rl {
namespace {

// Rows generated at once by an evaluation (its engine's max_batch).
constexpr int64_t kMaxEvalBatch = 256;
// KV-cache bytes an evaluation may hold (float32 keys and values of every layer).
constexpr int64_t kEvalCacheBytes = int64_t(1) << 30;
// Positions past prompt + response the engine reserves for drafts, even when it does not
// speculate (its default arms' need: 10).
constexpr int64_t kEvalHeadroom = 16;

// Plain decoding of `rows` requests of at most `positions` tokens each. Continuous batching
// admits the rest as rows finish, and each request draws from its own seed whatever its batch;
// the caps keep the KV cache from growing with the number of requests or with the model's
// context: 2048 rows of the micro policy would hold 2.1 GB, 64 rows of SmolLM2's full 8192
// positions 24 GB.
rollout::EngineOptions engine_options(const model::Transformer& policy, int64_t rows,
                                      int64_t positions) {
  const model::ModelConfig& c = policy->config();
  rollout::EngineOptions eo;
  eo.speculative = false;
  eo.max_seq = std::min(c.max_seq, positions + kEvalHeadroom);
  int64_t row_bytes = eo.max_seq * c.n_layers * 2 * c.n_kv_heads * c.head_dim() * 4;
  int64_t fit = std::max<int64_t>(1, kEvalCacheBytes / std::max<int64_t>(row_bytes, 1));
  eo.max_batch = std::clamp<int64_t>(rows, 1, std::min(kMaxEvalBatch, fit));
  return eo;
}

// The rewards of `texts` (see HeldOutRewards): `rewards`', or the task's own.
StatusOr<std::vector<double>> held_out_scores(const Task& task,
                                              const std::vector<Problem>& problems, int64_t samples,
                                              const std::vector<std::string>& texts,
                                              const HeldOutRewards& rewards) {
  if (rewards) {
    StatusOr<std::vector<double>> scored = rewards(problems, samples, texts);
    if (!scored.ok()) return scored.status().with_context("held-out rewards");
    if (scored->size() != texts.size())
      return Status::Internal("held-out rewards: " + std::to_string(scored->size()) +
                              " rewards for " + std::to_string(texts.size()) + " responses");
    return scored;
  }
  std::vector<double> scores;
  for (size_t j = 0; j < texts.size(); ++j)
    scores.push_back(task.reward(problems[j / size_t(samples)], texts[j]));
  return scores;
}

}  // namespace

void set_stop_tokens(const Codec& codec, rollout::Request* r) {
  const std::vector<int64_t>& ends = codec.end_ids();
  r->stop_token = ends.front();
  r->more_stop_tokens.assign(ends.begin() + 1, ends.end());
}

StatusOr<HeldOutResult> evaluate_held_out(model::Transformer policy, const Task& task, int64_t n,
                                          int32_t max_tokens, double temperature, int64_t samples,
                                          uint64_t seed, const Codec* codec_or_null,
                                          const HeldOutRewards& rewards) {
  const Codec& codec = codec_or_null ? *codec_or_null : ascii_codec();
  if (temperature <= 0) samples = 1;
  torch::NoGradGuard no_grad;
  policy->eval();
  std::vector<Problem> problems;
  std::vector<rollout::Request> requests;
  int64_t longest = 1;  // prompt tokens
  int64_t max_prompt = policy->config().max_seq - max_tokens - kEvalHeadroom;
  for (int64_t i = 0; i < n; ++i) {
    StatusOr<FittedProblem> f = fitting_problem(task, codec, uint64_t(i), true, max_prompt);
    if (!f.ok()) return f.status();
    problems.push_back(f->problem);
    longest = std::max<int64_t>(longest, int64_t(f->prompt.size()));
    for (int64_t k = 0; k < samples; ++k) {
      rollout::Request r;
      r.id = i * samples + k;
      r.prompt = f->prompt;
      r.max_new_tokens = max_tokens;
      set_stop_tokens(codec, &r);
      r.sampling.temperature = temperature;
      r.seed = seed * 1000003ull + uint64_t(r.id);
      requests.push_back(std::move(r));
    }
  }
  StatusOr<std::unique_ptr<rollout::Engine>> engine = rollout::Engine::create(
      policy, model::Drafter(nullptr), engine_options(policy, n * samples, longest + max_tokens));
  if (!engine.ok()) return engine.status();
  StatusOr<std::vector<rollout::Completion>> out = (*engine)->generate(requests);
  if (!out.ok()) return out.status();
  std::vector<std::string> texts;
  for (const rollout::Completion& c : *out) {
    StatusOr<std::string> text = codec.decode(c.tokens);
    if (!text.ok()) return text.status();
    texts.push_back(std::move(*text));
  }
  StatusOr<std::vector<double>> scored = held_out_scores(task, problems, samples, texts, rewards);
  if (!scored.ok()) return scored.status();
  const std::vector<double>& scores = *scored;
  HeldOutResult res;
  res.problems = n;
  res.samples = samples;
  res.per_problem.assign(size_t(n), 0.0);
  for (size_t j = 0; j < out->size(); ++j) {
    double r = scores[j];
    res.per_problem[j / size_t(samples)] += r / double(samples);
    res.reward += r;
    res.mean_tokens += double((*out)[j].tokens.size());
    res.marked += final_answer(texts[j]).empty() ? 0.0 : 1.0;
  }
  if (!out->empty()) {
    double n_out = double(out->size());
    res.reward /= n_out, res.mean_tokens /= n_out, res.marked /= n_out;
  }
  res.evaluated = std::move(problems);
  res.rewards = scores;
  for (size_t j = 0; j < out->size(); ++j) {
    res.prompt_ids.push_back(requests[j].prompt);
    res.response_ids.push_back(std::move((*out)[j].tokens));
  }
  return res;
}

}  // namespace tlt::rl
