#include "runtime/rl/evaluation.h"

#include <algorithm>

#include "runtime/rl/text.h"
#include "runtime/rollout/engine.h"

namespace tlt::rl {
namespace {

// Rows generated at once by an evaluation (its engine's max_batch).
constexpr int64_t kMaxEvalBatch = 256;

}  // namespace

StatusOr<HeldOutResult> evaluate_held_out(model::Transformer policy, const Task& task, int64_t n,
                                          int32_t max_tokens, double temperature, int64_t samples,
                                          uint64_t seed) {
  if (temperature <= 0) samples = 1;
  torch::NoGradGuard no_grad;
  policy->eval();
  rollout::EngineOptions eo;
  eo.speculative = false;
  // Continuous batching admits the rest as rows finish, and each request draws from its own
  // seed whatever its batch; the cap keeps the KV cache (rows x max_seq) from growing with n:
  // 2048 rows of the micro policy would hold 2.1 GB.
  eo.max_batch = std::clamp<int64_t>(n * samples, 1, kMaxEvalBatch);
  eo.max_seq = policy->config().max_seq;
  StatusOr<std::unique_ptr<rollout::Engine>> engine =
      rollout::Engine::create(policy, model::Drafter(nullptr), eo);
  if (!engine.ok()) return engine.status();
  std::vector<Problem> problems;
  std::vector<rollout::Request> requests;
  for (int64_t i = 0; i < n; ++i) {
    problems.push_back(task.problem(uint64_t(i), /*held_out=*/true));
    for (int64_t k = 0; k < samples; ++k) {
      rollout::Request r;
      r.id = i * samples + k;
      r.prompt = encode_text(problems.back().prompt);
      r.max_new_tokens = max_tokens;
      r.stop_token = kEndOfText;
      r.sampling.temperature = temperature;
      r.seed = seed * 1000003ull + uint64_t(r.id);
      requests.push_back(std::move(r));
    }
  }
  StatusOr<std::vector<rollout::Completion>> out = (*engine)->generate(requests);
  if (!out.ok()) return out.status();
  HeldOutResult res;
  res.problems = n;
  res.samples = samples;
  res.per_problem.assign(size_t(n), 0.0);
  for (size_t j = 0; j < out->size(); ++j) {
    double r = task.reward(problems[j / size_t(samples)], decode_text((*out)[j].tokens));
    res.per_problem[j / size_t(samples)] += r / double(samples);
    res.reward += r;
    res.mean_tokens += double((*out)[j].tokens.size());
  }
  if (!out->empty()) res.reward /= double(out->size()), res.mean_tokens /= double(out->size());
  return res;
}

}  // namespace tlt::rl
