// Prompt + response sequences as one right-padded batch, and their per-token log-probabilities
// under a policy: what the warm start, the GRPO update and the evaluation share.
//
// Shapes: B sequences, T = longest prompt + response, V vocabulary.
// Thread safety: functions; the model must not be modified concurrently.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "runtime/model/transformer.h"

namespace tlt::rl {

struct SequenceBatch {
  torch::Tensor tokens;   // (B, T) int64, right-padded with end-of-text
  torch::Tensor targets;  // (B, T-1) int64: tokens shifted left (what position j predicts)
  torch::Tensor mask;     // (B, T-1) float: 1 where targets[j] is a response token
  int64_t response_tokens = 0;
};

// prompts[i] + responses[i] per row. Every prompt has at least one token.
SequenceBatch make_batch(const std::vector<std::vector<int64_t>>& prompts,
                         const std::vector<std::vector<int64_t>>& responses);

// Log-probabilities (B, T-1) of batch.targets under `model` with logits divided by
// `temperature` (the rollouts' sampling distribution). Differentiable unless under NoGradGuard.
torch::Tensor sequence_logprobs(model::Transformer& model, const SequenceBatch& batch,
                                double temperature);

}  // namespace tlt::rl
