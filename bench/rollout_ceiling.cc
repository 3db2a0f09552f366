#include "bench/rollout_ceiling.h"

#include <algorithm>
#include <cstdio>

#include <torch/cuda.h>

#include "runtime/clock.h"
#include "runtime/model/bfloat16_probe.h"
#include "runtime/model/precision.h"

namespace tlt::bench {

void finish_device(const model::Transformer& target) {
  const torch::Device dev = target->lm_head->weight.device();
  if (dev.is_cuda()) torch::cuda::synchronize(dev.index());
}

// Seconds of one target forward of b x k new tokens per request over a cache already holding
// `context` positions per request: a plain decode step at k = 1, a chain verify of k - 1 drafts
// otherwise. The fastest of `reps` (noise only ever slows a forward); nothing is committed, so
// every repetition rewrites the same positions.
// `capacity`: positions the cache holds per request (0: just enough).
double forward_seconds(model::Transformer target, int64_t b, int64_t k, int64_t context, int reps,
                       bool bfloat16, int64_t capacity) {
  torch::NoGradGuard no_grad;
  const torch::Device dev = target->lm_head->weight.device();
  auto finished = [&] { finish_device(target); };
  int64_t rows = bfloat16 ? model::bfloat16_decode_rows(target) : 0;
  model::Bfloat16Inference products(rows > 0, rows);
  int64_t vocab = target->config().vocab;
  auto cache = target->make_cache(b, std::max(capacity, context + k + 1));
  for (int64_t i = 0; i < b; ++i) cache->add_slot();
  const auto ids = torch::TensorOptions().dtype(torch::kInt64).device(dev);
  torch::Tensor zero = torch::zeros({b}, ids);                      // (b,)
  torch::Tensor prompt = torch::randint(vocab, {b, context}, ids);  // (b, context)
  // Prefilled 16 positions at a time: a forward's logits are (b, T, V), 400 MB for a 49152-token
  // vocabulary at b = 16, T = 128, which would swamp the model's own memory in the peak RSS.
  for (int64_t s = 0; s < context; s += 16) {
    int64_t n = std::min<int64_t>(16, context - s);
    target->forward(prompt.slice(1, s, s + n), model::sequential_positions(zero + s, n),
                    cache.get());  // (b, n) tokens
    for (int64_t i = 0; i < b; ++i) cache->commit_prefix(i, n);
  }
  torch::Tensor tokens = torch::randint(vocab, {b, k}, ids);                 // (b, k)
  torch::Tensor positions = model::sequential_positions(zero + context, k);  // (b, k)
  double best = 1e30;
  finished();
  for (int r = 0; r < reps + 2; ++r) {  // two warm-up forwards
    double t0 = runtime::now_s();
    target->forward(tokens, positions, cache.get());
    finished();
    if (r >= 2) best = std::min(best, runtime::now_s() - t0);
  }
  return best;
}

// The most any drafting strategy can gain at batch b on this machine: verifying k tokens per
// request in one forward against k plain steps, as if every draft were accepted and drafting
// cost nothing, i.e. max over k of k * T(b, 1) / T(b, k). Where decoding is bound by reading
// the weights (a GPU, or batch 1 here), T(b, k) barely grows with k and the bound is large;
// where it is bound by arithmetic, T(b, k) grows like k and the bound nears 1.
void print_ceiling(model::Transformer target, const std::vector<int>& batches, int64_t context,
                   bool bfloat16) {
  const std::vector<int64_t> widths{2, 3, 5, 7, 8};
  std::printf(
      "\nspeculation ceiling (every draft accepted, drafting free; context %lld tokens):\n"
      "%6s %12s",
      (long long)context, "batch", "plain ms");
  for (int64_t k : widths) std::printf("   k=%lld ms", (long long)k);
  std::printf(" %9s\n", "ceiling");
  for (int b : batches) {
    double t1 = forward_seconds(target, b, 1, context, 10, bfloat16);
    double ceiling = 1.0;
    std::printf("%6d %12.2f", b, 1e3 * t1);
    for (int64_t k : widths) {
      double tk = forward_seconds(target, b, k, context, 10, bfloat16);
      ceiling = std::max(ceiling, double(k) * t1 / tk);
      std::printf(" %9.2f", 1e3 * tk);
    }
    std::printf(" %8.2fx\n", ceiling);
    std::fflush(stdout);
  }
}

void print_model_ceiling(model::Transformer target, const std::vector<int>& batches,
                         int64_t ceiling_context, bool bfloat16) {
  // A model shorter than that (the tiny test checkpoints) gets what its positions allow.
  const int64_t capacity = std::min<int64_t>(ceiling_context + 128, target->config().max_seq);
  const int64_t context = std::min<int64_t>(ceiling_context, capacity - 17);
  std::printf(
      "\nforward times, KV cache of %lld positions (%lld filled), fastest of 5:\n"
      "| batch | forward of 1 token | 8 tokens | 16 tokens | k x T(b,1)/T(b,k) at k=8 |\n"
      "|---:|---:|---:|---:|---:|\n",
      (long long)capacity, (long long)context);
  for (int b : batches) {
    double t1 = forward_seconds(target, b, 1, context, 5, bfloat16, capacity);
    double t8 = forward_seconds(target, b, 8, context, 5, bfloat16, capacity);
    double t16 = forward_seconds(target, b, 16, context, 5, bfloat16, capacity);
    std::printf("| %d | %.0f ms | %.0f ms | %.0f ms | %.2fx |\n", b, 1e3 * t1, 1e3 * t8, 1e3 * t16,
                8.0 * t1 / t8);
    std::fflush(stdout);
  }
}

}  // namespace tlt::bench
