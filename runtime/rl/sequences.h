// Prompt + response sequences as one right-padded batch, and their per-token log-probabilities
// under a policy: what the warm start, the GRPO update and the evaluation share. Long-tailed
// batches can be cut into micro-batches of similar length, each padded only to its own longest
// row (plan_microbatches + gather_rows), so a forward costs the tokens it needs, not B*T.
//
// Shapes: B sequences, T = longest prompt + response, V vocabulary; b rows and t tokens of a
// micro-batch (t <= T).
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

// prompts[i] + responses[i] per row. Every prompt has at least one token. On the CPU (planning
// reads it there); to_device moves it to a model's.
SequenceBatch make_batch(const std::vector<std::vector<int64_t>>& prompts,
                         const std::vector<std::vector<int64_t>>& responses);

// Tokens each row needs: its prompt + response length, read from the mask as the position of its
// last response target + 2 (causal attention: later padding cannot change earlier logits).
// A row without response tokens needs 2 (one target column). Returns (B,) values in [2, T].
std::vector<int64_t> row_lengths(const SequenceBatch& batch);

// Some rows of a batch, to be run as one padded batch of b x t tokens.
struct MicroBatch {
  std::vector<int64_t> rows;  // (b,) indices into the parent batch, longest first
  int64_t t = 0;              // tokens per row: the longest member's row_lengths value
  // With prompt sharing (plan_microbatches): the rows' shared prefix length q (0: none) and
  // which prompt group of the plan they belong to (-1: none). A group's micro-batches are
  // consecutive in the plan and can all attend to one run of its prefix.
  int64_t shared = 0;
  int64_t group = -1;
};

// Splits rows [lo, hi) of `batch` (0 <= lo < hi <= B) into micro-batches of similar length:
// rows sorted longest first (ties by row index), a micro-batch grows while its
// rows * t <= max_tokens, where t is its first (longest) row's length; a row longer than
// max_tokens runs alone. max_tokens <= 0: one micro-batch of rows lo..hi-1 in order with
// t = T (the unsplit, fully padded layout). Every row of [lo, hi) lands in exactly one
// micro-batch.
// share_prompts (with max_tokens > 0): rows with the same prompt (a GRPO group) whose shared
// prefix q (its prompt less its last token) is at least kMinSharedPrefix tokens are planned apart
// from other rows, their micro-batches marked with q and the group (MicroBatch::shared, group):
// the prefix runs once for all of them (sequence_logprobs with a SharedPrefix), so a micro-batch
// of n rows runs n * (t - q) <= max_tokens positions of its own. A group's rows, longest first,
// are cut where the fewest positions run, counting kMicroBatchOverhead for each micro-batch
// (greedy filling would pad a group's short samples to its one long sample). Other rows are
// planned as above.
std::vector<MicroBatch> plan_microbatches(const SequenceBatch& batch, int64_t lo, int64_t hi,
                                          int64_t max_tokens, bool share_prompts = false);

// Shared prefixes shorter than this run with the rest of their rows (too little to save).
constexpr int64_t kMinSharedPrefix = 16;
// What planning a shared group counts for each further micro-batch, in positions: smaller matrix
// products run less efficiently and every forward has fixed costs, so a long row and a short one
// are not split for a few positions. On SmolLM2 (bench_rollout --model --ceiling-only, one
// 8-answer group) 32 gave 888 positions per pass in 10.9 s, 128 1004 in 10.6 s, 512 1310 in 11.8 s.
constexpr int64_t kMicroBatchOverhead = 128;

// Tokens every row of `batch` shares before its first response target: the longest common
// prefix of the rows' tokens, cut to the earliest position whose target is a response token (so
// every log-probability that counts lies after it). For a GRPO group that is its prompt less
// the last token. 0 for a batch of one row.
int64_t shared_prefix_length(const SequenceBatch& batch);

// The rows of `mb` cut to mb.t tokens: tokens (b, t), targets and mask (b, t-1), and
// response_tokens their mask sum. New tensors; `batch` is not modified.
SequenceBatch gather_rows(const SequenceBatch& batch, const MicroBatch& mb);

// `batch` with its tensors on `device` (the same tensors when they are there already, so on the
// CPU nothing is copied). Planning (row_lengths, plan_microbatches, shared_prefix_length) reads
// a batch on any device; the model's forward wants it on the model's.
SequenceBatch to_device(const SequenceBatch& batch, const torch::Device& device);

// Logits one log-probability pass may hold at once (rows x V): 2^22 floats, 16 MB in float32; on
// a 49152-wide head that is 85 positions.
constexpr int64_t kMaxLogitsPerChunk = int64_t(1) << 22;

// Log-probabilities (N,) of `targets` (N,) int64 under logits = hidden (N, C) @ weight (V, C)^T /
// temperature, computed max(1, max_logits / V) rows at a time: the forward keeps no logits, and
// the backward recomputes each chunk's (so neither holds more than one chunk's (rows, V) logits
// and softmax). Gradients flow to hidden and weight; equal to log_softmax(logits).gather(targets)
// up to floating-point summation order.
torch::Tensor chunked_token_logprobs(const torch::Tensor& hidden, const torch::Tensor& weight,
                                     const torch::Tensor& targets, double temperature,
                                     int64_t max_logits = kMaxLogitsPerChunk);

// Log-probabilities (B, T-1) of batch.targets under `model` with logits divided by
// `temperature` (the rollouts' sampling distribution) at the response positions (mask 1), and 0
// at the others. When the rows share a prefix of at least kMinSharedPrefix tokens
// (shared_prefix_length: a GRPO group's prompt), the prefix runs once (batch 1) and every row
// attends to its keys and values (model::SharedPrefix): the same values up to floating-point
// summation order, the gradients of all rows summed into the prefix's. share_prefix false: every
// row runs its whole sequence. prefix: that run of the rows' first prefix->length() tokens, done
// already (run_prefix), so that several micro-batches of one group share one run (the caller
// guarantees the rows start with those tokens). When the batch's B x (T-1) x V logits exceed
// max_logits, the LM head runs on response positions only, through chunked_token_logprobs, so a
// micro-batch never materialises its (b, t, V) logits; else (the presets' small vocabulary) one
// log_softmax over all of them. The batch is moved to the model's device when it is elsewhere;
// the result is on the model's device. Differentiable unless under NoGradGuard. Under a
// model::Bfloat16Autocast the matrix products (the LM head's included, forward and backward) run in
// bfloat16 and the log-probabilities are still computed and returned in the model's dtype.
torch::Tensor sequence_logprobs(model::Transformer& model, const SequenceBatch& batch,
                                double temperature, int64_t max_logits = kMaxLogitsPerChunk,
                                bool share_prefix = true,
                                const model::SharedPrefix* prefix = nullptr);

// The keys and values of tokens (q,) int64 at positions 0..q-1 under `model`, batch 1, with
// their autograd history unless under NoGradGuard.
model::SharedPrefix run_prefix(model::Transformer& model, const torch::Tensor& tokens);

}  // namespace tlt::rl
