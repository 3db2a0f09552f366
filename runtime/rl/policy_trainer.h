// The trainer role's policy update: GRPO over one step's rollouts (runtime/rl/grpo.h), in
// `minibatches` sequential optimizer steps so the clipped ratio matters after the first one.
// logp_old is the rollout policy's own log-probability (recomputed here under the same
// weights the workers sampled with), logp_ref the frozen reference (the warm start).
//
// Thread safety: one thread drives a trainer.
#pragma once

#include <memory>
#include <string>

#include "api/status.h"
#include "runtime/model/transformer.h"
#include "runtime/rl/sequences.h"

namespace tlt::rl {

struct GrpoOptions {
  double learning_rate = 1e-5;
  double clip = 0.2;
  double kl_coef = 0.0;
  double temperature = 1.0;
  int64_t minibatches = 2;
  double grad_clip = 1.0;
};

struct UpdateStats {
  double loss = 0.0, kl = 0.0, clip_fraction = 0.0;  // means over minibatches
  double seconds = 0.0;
};

class PolicyTrainer {
 public:
  // policy is trained in place; reference is only read.
  PolicyTrainer(model::Transformer policy, model::Transformer reference, GrpoOptions options);

  // batch: B = P*G sequences; advantages (B,). Rows with advantage 0 still count in the KL term.
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
