// Pretraining with Token Superposition Training, and its plain next-token baseline, through one
// code path: a step reads B rows of s*L tokens (s = 1 in recovery and in the baseline), feeds
// the L bag means to the model, and minimises the multi-hot cross-entropy, which for s = 1 is
// ordinary next-token loss. Weights and AdamW state carry across the phase switch untouched.
// Held-out evaluation is always next-token loss (never the phase-1 loss; SEEDS.md section 2).
//
// Thread safety: one thread drives a trainer.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>

#include "api/status.h"
#include "runtime/model/transformer.h"
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
};

struct StepResult {
  int64_t step = 0;   // 0-based index of the step just taken
  std::string phase;  // superposition | recovery | baseline
  int64_t bag = 1;
  double loss = 0.0;  // training loss of the step (MCE in superposition, NTP otherwise)
  double lr = 0.0;
  double flops = 0.0;       // cumulative training FLOPs after this step
  int64_t tokens_seen = 0;  // cumulative corpus tokens read
  double seconds = 0.0;     // wall time of the step
};

class TSTTrainer {
 public:
  // held_out: tokenized held-out documents (evaluated as next-token rows of L + ... tokens).
  TSTTrainer(model::Transformer model, PackedStream train, PackedStream held_out,
             TrainerOptions options);

  StepResult step();
  // Mean next-token loss over the fixed held-out rows.
  double evaluate();
  int64_t steps_done() const { return step_; }
  double flops_done() const { return flops_; }
  bool finished() const { return step_ >= options_.schedule.steps; }
  const PackedStream& stream() const { return train_; }

  // Model, optimizer and stream position; resume continues identically.
  Status save(const std::string& dir) const;
  Status load(const std::string& dir);

 private:
  model::Transformer model_;
  PackedStream train_;
  TrainerOptions options_;
  std::unique_ptr<torch::optim::AdamW> optimizer_;
  torch::Tensor eval_rows_;  // (R, L) int64
  int64_t step_ = 0;
  double flops_ = 0.0;
};

}  // namespace tlt::tst
