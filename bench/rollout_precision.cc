#include "bench/rollout_precision.h"

#include <algorithm>
#include <cstdio>

#include "bench/rollout_ceiling.h"
#include "runtime/clock.h"
#include "runtime/drafter/trainer.h"
#include "runtime/model/drafter.h"
#include "runtime/model/precision.h"
#include "runtime/rl/sequences.h"

namespace tlt::bench {

// What bfloat16 products buy the policy update (spec.model.dtype): the forward and backward of
// its log-probabilities (rl::sequence_logprobs) over one micro-batch of 4 rows of 64 prompt + 192
// response tokens (the trainer's 1024-token budget; less for a model of shorter context),
// float32 against bfloat16 products, side by side, the fastest of 3 each.
void print_update_precision(model::Transformer target) {
  const int64_t row = std::min<int64_t>(256, target->config().max_seq), prompt = row / 4;
  torch::manual_seed(3);
  std::vector<std::vector<int64_t>> prompts, responses;
  for (int i = 0; i < 4; ++i) {
    torch::Tensor p = torch::randint(target->config().vocab, {prompt}, torch::kInt64);  // (P,)
    torch::Tensor r = torch::randint(target->config().vocab, {row - prompt}, torch::kInt64);
    prompts.emplace_back(p.data_ptr<int64_t>(), p.data_ptr<int64_t>() + p.numel());
    responses.emplace_back(r.data_ptr<int64_t>(), r.data_ptr<int64_t>() + r.numel());
  }
  const torch::Device dev = target->lm_head->weight.device();
  rl::SequenceBatch batch = rl::to_device(rl::make_batch(prompts, responses), dev);
  auto seconds = [&](bool bf16) {
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      target->zero_grad();
      double t0 = runtime::now_s();
      torch::Tensor logp;  // (4, row - 1)
      {
        model::Bfloat16Autocast mixed(dev, bf16);
        logp = rl::sequence_logprobs(target, batch, 1.0);
      }
      logp.sum().backward();
      finish_device(target);
      best = std::min(best, runtime::now_s() - t0);
    }
    target->zero_grad();
    return best;
  };
  double f32 = seconds(false), bf16 = seconds(true);
  std::printf(
      "\npolicy update, forward + backward of %lld tokens: float32 %.2f s, bfloat16 products "
      "%.2f s = %.2fx (spec.model.dtype; native bfloat16 here: %s)\n",
      (long long)(4 * row), f32, bf16, f32 / bf16, model::native_bfloat16(dev) ? "yes" : "no");
}

// What bfloat16 products buy the drafter's training (the warm start and the spot trainers, under
// spec.model.dtype): one optimizer step of a one-layer drafter at the target's width over 16
// windows of 64 positions, 3 unrolled levels and a 2048-token draft vocabulary (an RLJob's
// defaults for a real model), float32 against bfloat16 products, the fastest of 3 each after one
// warm-up step. The windows are random tokens with random target features: the cost does not
// depend on them.
Status print_drafter_precision(model::Transformer target) {
  const int64_t windows = 16, len = 64, c = target->config().dim;
  const int64_t vocab = std::min<int64_t>(2048, target->config().vocab);
  torch::manual_seed(4);
  torch::Tensor tokens = torch::randint(target->config().vocab, {windows, len}, torch::kInt64);
  torch::Tensor hidden = torch::randn({windows, len, c});  // (B, T, C)
  torch::Tensor mask = torch::ones({windows, len});        // (B, T)
  auto seconds = [&](bool bf16) -> StatusOr<double> {
    torch::manual_seed(1);
    model::Drafter drafter(target, 1);
    TLT_RETURN_IF_ERROR(drafter->set_draft_vocab(torch::arange(vocab, torch::kInt64)));
    drafter::DrafterTrainer trainer(drafter, target, 1e-3, 3, bf16);
    trainer.step(tokens, hidden, mask);
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      double t0 = runtime::now_s();
      trainer.step(tokens, hidden, mask);
      finish_device(target);
      best = std::min(best, runtime::now_s() - t0);
    }
    return best;
  };
  StatusOr<double> f32_or = seconds(false);
  if (!f32_or.ok()) return f32_or.status().with_context("drafter training step");
  StatusOr<double> bf16_or = seconds(true);
  if (!bf16_or.ok()) return bf16_or.status().with_context("drafter training step");
  double f32 = *f32_or, bf16 = *bf16_or;
  std::printf(
      "\ndrafter training step (%lld windows of %lld, 3 levels, %lld-token draft vocabulary): "
      "float32 %.3f s, bfloat16 products %.3f s = %.2fx\n",
      (long long)windows, (long long)len, (long long)vocab, f32, bf16, f32 / bf16);
  return Status::Ok();
}

}  // namespace tlt::bench
