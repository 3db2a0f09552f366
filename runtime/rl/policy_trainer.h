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
// Data parallel (a group of W trainer ranks, runtime/rl/trainer_ranks.h): rank 0 drives. Its
// update(), save(), load(), synchronise() and finish() announce themselves to the other ranks
// through the group's store; those run serve(), which takes part in each. An update sends rank
// 0's batch and advantages to every rank; each rank takes its share of every minibatch (whole
// GRPO groups, trainer_shards.h's rank_rows), computes its rows' logp_old and logp_ref with its
// own copies of the policy and the reference, and weighs its micro-batches by their share of the
// WHOLE minibatch's tokens (or rows); the gradients are summed over the ranks after the
// minibatch's backward (one flat buffer per dtype, not overlapped with it), so every rank clips
// and steps with the gradients one process would have, up to summation order. AdamW state is
// sharded (ZeRO stage 1): each rank holds the moments of the parameters it owns
// (partition_by_numel), steps those, and every parameter is then broadcast from its owner, so the
// ranks' parameters stay bitwise equal; every GrpoOptions::checksum_every updates they compare
// checksums of them. Loss, KL, clip fraction and the pass counts are summed over the ranks. A
// checkpoint is one file set whatever W: save() gathers the optimizer shards into rank 0's
// AdamW archive (transiently the whole state on rank 0), load() reads it on rank 0 and sends each
// rank its parameters and shard, so a run resumes with another W.
//
// Shapes: B sequences of the step, T the longest, b rows and t tokens of one micro-batch.
// Thread safety: one thread drives a trainer.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "api/spec.h"
#include "api/status.h"
#include "runtime/model/transformer.h"
#include "runtime/rl/grpo.h"
#include "runtime/rl/sequences.h"

namespace tlt::tst {
class DataParallelGroup;  // runtime/tst/group.h
}

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
  // Asked before every micro-batch's forward until the update's first optimizer step (unset:
  // never): true stops the update there (UpdateStats::cancelled), a cancel point for SIGTERM
  // within a long update. A cancelled update leaves the policy and the AdamW state as they were
  // before it, so the last completed step stays a valid checkpoint; once the optimizer has
  // stepped, the update runs to its end (at most the rest of an update after its first
  // minibatch). Trainer ranks never cancel: every rank must take the same optimizer steps.
  std::function<bool()> cancelled;
  // Data parallel: rows per GRPO group (B = P * group_size), which rank_rows keeps whole on one
  // rank; 0: groups are runs of rows with the same prompt (runtime/rl/trainer_shards.h).
  int64_t group_size = 0;
  // Data parallel: before every this-many-th update, the first included, the ranks compare
  // checksums of their parameters (0: never); a mismatch fails the update naming the ranks.
  int64_t checksum_every = 10;
};

// The update's options for spec.algorithm (learning rate, clip, KL coefficient, temperature, loss
// aggregation, group size) at the run's precision; the rest keep their defaults. Rank 0 and every
// other trainer rank (from the spec part rank 0 sends) build theirs with it.
GrpoOptions grpo_options(const api::AlgorithmSpec& algorithm, bool bfloat16);

struct UpdateStats {
  double loss = 0.0, kl = 0.0, clip_fraction = 0.0;  // means over minibatches
  double seconds = 0.0;
  int64_t microbatches = 0;  // policy forward/backward passes, over all minibatches
  int64_t positions = 0;     // token positions those passes ran over, padding included (a
                             // shared prompt counted once per pass)
  bool cancelled = false;    // stopped by GrpoOptions::cancelled before the update finished
  // Ok, or why a data-parallel update failed: a collective (a rank died, or stalled past the
  // group's timeout) or ranks whose parameters differ. The policy is then part-way through the
  // update, as after a cancel.
  Status status;
  // Each rank's peak resident memory and the bytes of AdamW state it holds, rank r at [r] (one
  // entry without a group).
  std::vector<int64_t> rank_peak_rss_bytes, rank_optimizer_bytes;
};

class PolicyTrainer {
 public:
  // policy is trained in place; reference is only read. group: the joined group of trainer ranks
  // (borrowed, outlives the trainer; null or one rank: this process alone). Every rank builds
  // the same architecture; rank 0's weights reach the others through synchronise().
  PolicyTrainer(model::Transformer policy, model::Transformer reference, GrpoOptions options,
                tst::DataParallelGroup* group = nullptr);
  ~PolicyTrainer();

  // batch: B = P*G sequences (as make_batch builds them); advantages (B,). Rows with advantage 0
  // still count in the KL term. Minibatch k of m holds rows [B*k/m, B*(k+1)/m). With a group:
  // rank 0 only (the others receive it in serve()); check UpdateStats::status.
  UpdateStats update(const SequenceBatch& batch, const torch::Tensor& advantages);

  // Policy weights and AdamW state. load() returns NotFound/Corruption/InvalidArgument for a
  // missing, damaged or mismatched checkpoint and leaves the policy unchanged on a bad model
  // file. With a group: rank 0 only (the files are rank 0's); the collectives' Unavailable.
  Status save(const std::string& dir, const std::string& metadata) const;
  StatusOr<std::string> load(const std::string& dir);

  // Rank 0 of a group: every rank takes rank 0's policy and reference weights (before the first
  // update). Ok at once without a group.
  Status synchronise();
  // Rank 0 of a group: the other ranks' serve() returns Ok. Ok at once without a group.
  Status finish();
  // Ranks > 0: runs rank 0's commands until finish() (Ok). Unavailable when rank 0's store or a
  // collective fails, InvalidArgument for a command it does not know; DeadlineExceeded when no
  // command came for idle_timeout_s.
  Status serve(int idle_timeout_s);

  int rank() const;
  int world() const;
  // Bytes of AdamW moments this rank holds (its shard with a group).
  int64_t optimizer_bytes() const;

 private:
  UpdateStats run_update(const SequenceBatch& batch, const torch::Tensor& advantages);
  UpdateStats gather_stats(UpdateStats st);
  Status check_parameters();
  Status gather_optimizer(torch::optim::AdamW* full) const;
  Status load_shared(const std::string& dir, StatusOr<std::string>* meta);
  Status post(const std::string& op) const;

  model::Transformer policy_, reference_;
  GrpoOptions options_;
  tst::DataParallelGroup* group_ = nullptr;  // null: one rank
  std::vector<torch::Tensor> params_;        // trainable_parameters(policy_)
  std::vector<int> owner_;                   // params_[i]'s owner rank
  // AdamW over the parameters this rank owns (all of them without a group).
  std::unique_ptr<torch::optim::AdamW> optimizer_;
  int64_t updates_ = 0;
  mutable int64_t commands_ = 0;  // rank 0: commands posted; others: taken
};

}  // namespace tlt::rl
