#include "runtime/rl/sequences.h"

#include <algorithm>
#include <numeric>

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

std::vector<int64_t> row_lengths(const SequenceBatch& batch) {
  int64_t b = batch.mask.size(0), t1 = batch.mask.size(1);
  torch::Tensor j = torch::arange(t1, torch::kInt64).unsqueeze(0);        // (1, T-1)
  torch::Tensor last = (j * (batch.mask > 0).to(torch::kInt64)).amax(1);  // (B,)
  torch::Tensor len = (last + 2).contiguous();                            // (B,)
  return std::vector<int64_t>(len.data_ptr<int64_t>(), len.data_ptr<int64_t>() + b);
}

std::vector<MicroBatch> plan_microbatches(const SequenceBatch& batch, int64_t lo, int64_t hi,
                                          int64_t max_tokens) {
  std::vector<int64_t> rows(static_cast<size_t>(hi - lo));
  std::iota(rows.begin(), rows.end(), lo);
  if (max_tokens <= 0) return {MicroBatch{rows, batch.tokens.size(1)}};
  std::vector<int64_t> len = row_lengths(batch);
  std::stable_sort(rows.begin(), rows.end(), [&](int64_t x, int64_t y) { return len[x] > len[y]; });
  std::vector<MicroBatch> out;
  for (int64_t r : rows) {
    // Rows come longest first, so a micro-batch's t is its first row's length.
    if (out.empty() || int64_t(out.back().rows.size() + 1) * out.back().t > max_tokens)
      out.push_back(MicroBatch{{}, len[r]});
    out.back().rows.push_back(r);
  }
  return out;
}

SequenceBatch gather_rows(const SequenceBatch& batch, const MicroBatch& mb) {
  torch::Tensor idx = torch::tensor(mb.rows, torch::kInt64);  // (b,)
  SequenceBatch out;
  out.tokens = batch.tokens.index_select(0, idx).narrow(1, 0, mb.t).contiguous();        // (b, t)
  out.targets = batch.targets.index_select(0, idx).narrow(1, 0, mb.t - 1).contiguous();  // (b, t-1)
  out.mask = batch.mask.index_select(0, idx).narrow(1, 0, mb.t - 1).contiguous();        // (b, t-1)
  out.response_tokens = int64_t(out.mask.sum().item<double>());
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
