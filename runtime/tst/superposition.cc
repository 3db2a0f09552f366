#include "runtime/tst/superposition.h"

namespace tlt::tst {

torch::Tensor bag_embeddings(torch::nn::Embedding embed, const torch::Tensor& tokens, int64_t s) {
  int64_t b = tokens.size(0), l = tokens.size(1) / s;
  torch::Tensor e = embed->forward(tokens.narrow(1, 0, l * s));  // (B, s*L, C)
  torch::Dtype acc = e.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  torch::Tensor mean = e.to(acc).view({b, l, s, e.size(2)}).sum(2) / double(s);  // (B, L, C)
  return mean.to(e.scalar_type());
}

torch::Tensor bag_labels(const torch::Tensor& tokens, int64_t s) {
  int64_t b = tokens.size(0), l = tokens.size(1) / s;
  torch::Tensor raw = tokens.narrow(1, 0, l * s);
  torch::Tensor labels = torch::full({b, l * s}, kIgnore, raw.options());
  if (l > 1) labels.narrow(1, 0, (l - 1) * s).copy_(raw.narrow(1, s, (l - 1) * s));
  return labels.view({b, l, s});
}

torch::Tensor bag_weights(int64_t s, const std::string& weighting, torch::Dtype dtype) {
  torch::Tensor w = weighting == "power-law"
                        ? 1.0 / torch::arange(1, s + 1, torch::TensorOptions().dtype(dtype))
                        : torch::ones({s}, torch::TensorOptions().dtype(dtype));
  return w / w.sum();
}

namespace {
// Per-position loss (B, L) and which positions are scored (B, L) bool.
std::pair<torch::Tensor, torch::Tensor> per_position_ce(const torch::Tensor& logits,
                                                        const torch::Tensor& labels,
                                                        const torch::Tensor& weights) {
  torch::Dtype acc = logits.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  torch::Tensor logp = torch::log_softmax(logits.to(acc), -1);  // (B, L, V)
  torch::Tensor valid = labels != kIgnore;                      // (B, L, s)
  torch::Tensor picked = logp.gather(2, labels.clamp_min(0));   // (B, L, s)
  torch::Tensor w =
      weights.to(logp.device(), logp.scalar_type()).view({1, 1, -1}) * valid.to(logp.dtype());
  torch::Tensor w_sum = w.sum(-1);                                         // (B, L)
  torch::Tensor per_pos = -(picked * w).sum(-1) / w_sum.clamp_min(1e-12);  // (B, L)
  return {per_pos, w_sum > 0};
}
}  // namespace

torch::Tensor multi_hot_ce(const torch::Tensor& logits, const torch::Tensor& labels,
                           const torch::Tensor& weights) {
  auto [per_pos, has] = per_position_ce(logits, labels, weights);
  return per_pos.masked_select(has).mean();
}

torch::Tensor multi_hot_ce_sum(const torch::Tensor& logits, const torch::Tensor& labels,
                               const torch::Tensor& weights) {
  auto [per_pos, has] = per_position_ce(logits, labels, weights);
  return per_pos.masked_select(has).sum();
}

int64_t scored_positions(const torch::Tensor& labels) {
  return (labels != kIgnore).any(-1).sum().item<int64_t>();
}

}  // namespace tlt::tst
