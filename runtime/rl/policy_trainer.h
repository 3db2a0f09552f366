// The trainer role's policy update: GRPO over one step's rollouts (runtime/rl/grpo.h), in
// `minibatches` sequential optimizer steps so the clipped ratio matters after the first one.
// logp_old is the rollout policy's own log-probability (recomputed here under the same
// weights the workers sampled with; the first minibatch reuses its own training forward, which
// runs before any optimizer step), logp_ref the frozen reference (the warm start).
//
// Micro-batching: within each minibatch the rows are sorted by length and run in micro-batches of
// similar length, each padded only to its own longest row (GrpoOptions::max_tokens_per_microbatch),
// gradients accumulated before the minibatch's one optimizer step. Each micro-batch's loss is
// weighted by its share of the minibatch's response tokens (token mean) or rows (sequence mean),
// so the loss stays the mean over the whole minibatch, and loss, gradients, KL and clip fraction
// equal those of one padded batch up to floating-point summation order. Minibatch membership is
// unchanged by it.
//
// Shapes: B sequences of the step, T the longest, b rows and t tokens of one micro-batch.
// Thread safety: one thread drives a trainer.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "api/status.h"
#include "runtime/model/transformer.h"
#include "runtime/rl/grpo.h"
#include "runtime/rl/sequences.h"

namespace tlt::rl {

struct GrpoOptions {
  double learning_rate = 1e-5;
  double clip = 0.2;
  double kl_coef = 0.0;
  double temperature = 1.0;
  int64_t minibatches = 2;
  double grad_clip = 1.0;
  // Token budget of one forward/backward: a micro-batch of b rows padded to t tokens keeps
  // b * t <= this (a longer row runs alone). 1024: on the bench's 128-row long-tailed step
  // (micro preset, one core) 512..1024 were fastest (1.2 s vs 1.6 s at 2048, 3.0 s at 4096,
  // 35 s unsplit); attention's t^2 makes long padded rows dear. 0: each minibatch is one batch
  // padded to the step's longest sequence, logp_old / logp_ref from one forward over all B
  // rows (the unsplit layout, kept as the reference for tests).
  int64_t max_tokens_per_microbatch = 1024;
  // How the loss averages over response tokens (runtime/rl/grpo.h; spec.algorithm.lossAggregation).
  LossAggregation aggregation = LossAggregation::kTokenMean;
  // Rows with the same prompt (a GRPO group) run it once per pass (the reference's, the old
  // policy's, the training forward and its backward) and every micro-batch of the group attends
  // to its keys and values (plan_microbatches and sequence_logprobs with sharing): on a chat
  // model whose prompts are longer than its answers most of an update's positions were prompt
  // positions. The training pass detaches the prefix's keys and values, lets each micro-batch's
  // backward add up their gradients, and backpropagates the sums through the prefix once.
  // The same loss and gradients up to floating-point summation order; false: every row runs its
  // whole sequence (the layout before sharing, kept for tests).
  bool share_prompts = true;
  // Mixed precision (runtime/model/precision.h; spec.model.dtype): the forwards of the update
  // run their matrix products in bfloat16, and so do their backwards; the policy's weights,
  // gradients and AdamW state stay in their own dtype.
  bool bfloat16 = false;
  // Asked before every micro-batch's forward (unset: never): true stops the update there
  // (UpdateStats::cancelled), a cancel point for SIGTERM within a long update. The policy may
  // then have taken some of the update's minibatch steps: do not checkpoint it as any step's.
  std::function<bool()> cancelled;
};

struct UpdateStats {
  double loss = 0.0, kl = 0.0, clip_fraction = 0.0;  // means over minibatches
  double seconds = 0.0;
  int64_t microbatches = 0;  // policy forward/backward passes, over all minibatches
  int64_t positions = 0;     // token positions those passes ran over, padding included (a
                             // shared prompt counted once per pass)
  bool cancelled = false;    // stopped by GrpoOptions::cancelled before the update finished
};

class PolicyTrainer {
 public:
  // policy is trained in place; reference is only read.
  PolicyTrainer(model::Transformer policy, model::Transformer reference, GrpoOptions options);

  // batch: B = P*G sequences (as make_batch builds them); advantages (B,). Rows with advantage 0
  // still count in the KL term. Minibatch k of m holds rows [B*k/m, B*(k+1)/m).
  UpdateStats update(const SequenceBatch& batch, const torch::Tensor& advantages);

  // Policy weights and AdamW state. load() returns NotFound/Corruption/InvalidArgument for a
  // missing, damaged or mismatched checkpoint and leaves the policy unchanged on a bad model
  // file.
  Status save(const std::string& dir, const std::string& metadata) const;
  StatusOr<std::string> load(const std::string& dir);

 private:
  model::Transformer policy_, reference_;
  GrpoOptions options_;
  std::unique_ptr<torch::optim::AdamW> optimizer_;
};

}  // namespace tlt::rl
