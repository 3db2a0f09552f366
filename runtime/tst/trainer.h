// Pretraining with Token Superposition Training, and its plain next-token baseline, through one
// code path: a step reads B rows of s*L tokens (s = 1 in recovery and in the baseline), feeds
// the L bag means to the model, and minimises the multi-hot cross-entropy, which for s = 1 is
// ordinary next-token loss. Weights and AdamW state carry across the phase switch untouched.
// Held-out evaluation is always next-token loss (never the phase-1 loss; SEEDS.md section 2).
//
// Data parallel (with a Collective of R ranks): every rank reads the whole global batch from its
// own copy of the stream (so stream positions and checkpoints agree) and runs rows r, r+R, ...
// (shard_rows). Its loss is its shard's loss sum divided by the scored positions of the global
// batch (allreduced first: uneven shards when R does not divide B, and -100 labels, leave ranks
// with different counts), so the allreduce-SUM of the gradients is exactly the single-process
// gradient of the global batch; clipping then sees the global norm and every rank takes the same
// AdamW step. Held-out batches are split across ranks and their losses summed.
//
// Thread safety: one thread drives a trainer.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>

#include "api/status.h"
#include "runtime/model/transformer.h"
#include "runtime/tst/data_parallel.h"
#include "runtime/tst/schedule.h"
#include "runtime/tst/stream.h"

namespace tlt::tst {

struct TrainerOptions {
  Schedule schedule;
  int64_t batch = 16;       // B rows per step
  int64_t positions = 128;  // L positions the model sees per row
  double weight_decay = 0.1;
  double grad_clip = 1.0;
  std::string weighting = "uniform";
  int64_t eval_batches = 4;
  // Mixed precision (runtime/model/precision.h; spec.model.dtype): matrix products in bfloat16,
  // weights, gradients, optimizer state and the loss in float32.
  bool bfloat16 = false;
  // WRONG on purpose, for tests only: with a group, each rank divides by its own scored
  // positions and the gradients are averaged over ranks. Equal to the right normalisation only
  // when every shard scores the same number of positions.
  bool local_normalisation = false;
};

struct StepResult {
  int64_t step = 0;   // 0-based index of the step just taken
  std::string phase;  // superposition | recovery | baseline
  int64_t bag = 1;
  double loss = 0.0;  // loss of the global batch (MCE in superposition, NTP otherwise)
  double lr = 0.0;
  double flops = 0.0;       // cumulative training FLOPs after this step
  int64_t tokens_seen = 0;  // cumulative corpus tokens read
  double seconds = 0.0;     // wall time of the step
};

class TSTTrainer {
 public:
  // held_out: tokenized held-out documents (evaluated as next-token rows of L + ... tokens).
  // group: borrowed, null for one process; with a group, call synchronise() before step().
  TSTTrainer(model::Transformer model, PackedStream train, PackedStream held_out,
             TrainerOptions options, Collective* group = nullptr);

  // Gives every rank rank 0's weights and checks that all ranks are at the same step of the same
  // plan (FailedPrecondition on every rank otherwise: a worker ran another job version or did not
  // see the checkpoint). Ok at once without a group; Unavailable when a peer is gone.
  Status synchronise();
  // One optimizer step on the next global batch. With a group, a failed collective (a peer
  // gone or stalled) takes no step, sets status() and returns a NaN loss.
  StepResult step();
  // Mean next-token loss over the fixed held-out rows (the same value on every rank); NaN with
  // status() set when a collective fails.
  double evaluate();
  // Ok, or the first collective failure (Unavailable); after one the trainer is unusable.
  const Status& status() const { return status_; }
  int64_t steps_done() const { return step_; }
  double flops_done() const { return flops_; }
  bool finished() const { return step_ >= options_.schedule.steps; }
  const PackedStream& stream() const { return train_; }
  const model::Transformer& model() const { return model_; }

  // Model, optimizer and stream position; resume continues identically.
  Status save(const std::string& dir) const;
  Status load(const std::string& dir);

 private:
  // Backpropagates rows (B_r, s*L) and leaves in every .grad the gradient of the global batch's
  // loss; returns that loss.
  StatusOr<double> backward(const torch::Tensor& rows, int64_t s);
  // Sums the gradients (and this rank's share of the loss) over the group; returns the loss.
  StatusOr<double> all_reduce_gradients(const torch::Tensor& loss);
  // The model's device: batches are moved there (the caller moves the model before building).
  torch::Device device() const { return model_->lm_head->weight.device(); }

  model::Transformer model_;
  PackedStream train_;
  TrainerOptions options_;
  Collective* group_;                  // borrowed; null: one process
  std::vector<torch::Tensor> params_;  // what the optimizer steps: all but a tied LM head
  std::unique_ptr<torch::optim::AdamW> optimizer_;
  torch::Tensor eval_rows_;  // (eval_batches * B, L) int64
  int64_t step_ = 0;
  double flops_ = 0.0;
  Status status_;  // the first collective failure
};

}  // namespace tlt::tst
