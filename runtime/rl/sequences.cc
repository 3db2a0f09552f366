#include "runtime/rl/sequences.h"

#include <algorithm>

#include "runtime/rl/grpo.h"
#include "runtime/rl/text.h"

namespace tlt::rl {

SequenceBatch make_batch(const std::vector<std::vector<int64_t>>& prompts,
                         const std::vector<std::vector<int64_t>>& responses) {
  int64_t b = int64_t(prompts.size()), t = 2;
  for (int64_t i = 0; i < b; ++i)
    t = std::max<int64_t>(t, int64_t(prompts[i].size() + responses[i].size()));
  std::vector<int64_t> tok(b * t, kEndOfText);
  std::vector<float> mask(b * (t - 1), 0.f);
  SequenceBatch out;
  for (int64_t i = 0; i < b; ++i) {
    int64_t p = int64_t(prompts[i].size()), r = int64_t(responses[i].size());
    std::copy(prompts[i].begin(), prompts[i].end(), tok.begin() + i * t);
    std::copy(responses[i].begin(), responses[i].end(), tok.begin() + i * t + p);
    // Position j predicts token j+1; response tokens sit at p .. p+r-1.
    for (int64_t j = p - 1; j < p + r - 1; ++j) mask[i * (t - 1) + j] = 1.f;
    out.response_tokens += r;
  }
  out.tokens = torch::tensor(tok, torch::kInt64).view({b, t});
  out.targets = out.tokens.narrow(1, 1, t - 1).contiguous();
  out.mask = torch::tensor(mask, torch::kFloat32).view({b, t - 1});
  return out;
}

torch::Tensor sequence_logprobs(model::Transformer& model, const SequenceBatch& batch,
                                double temperature) {
  int64_t b = batch.tokens.size(0), t = batch.tokens.size(1);
  torch::Tensor inputs = batch.tokens.narrow(1, 0, t - 1);  // (B, T-1)
  torch::Tensor positions = torch::arange(t - 1, torch::kInt64).unsqueeze(0).expand({b, t - 1});
  torch::Tensor logits = model->forward(inputs, positions).logits;  // (B, T-1, V)
  if (temperature != 1.0) logits = logits / temperature;
  return token_logprobs(logits, batch.targets);
}

}  // namespace tlt::rl
