// The data-parallel pieces of the policy update (runtime/rl/policy_trainer.h) over a c10d group
// of trainer ranks (runtime/tst/data_parallel.h's Collective): each rank's share of a minibatch
// (GRPO groups whole on one rank), the gradients summed over ranks, AdamW state sharded by
// whole parameters (ZeRO stage 1) with each parameter broadcast from its owner after the step,
// the step's batch sent from rank 0, parameter checksums and per-rank figures gathered.
//
// Every function taking a Collective is collective: every rank calls it in the same order with
// tensors of the same shapes and dtypes. Tensors may live on the CPU or the policy's device; a
// CUDA collective (NCCL) gets a device copy of CPU tensors. Errors: the collective's Unavailable
// (a rank died, or stalled past the group's timeout); the group is unusable afterwards.
//
// Shapes: B rows of the step, T tokens per row; W ranks; P parameters.
// Thread safety: one thread per rank.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "api/status.h"
#include "runtime/rl/sequences.h"
#include "runtime/tst/data_parallel.h"

namespace tlt::rl {

// Rows [lo, hi) of `batch` as runs of one GRPO group each (a run cut by lo or hi counts as
// one): rows [k * group_size, (k + 1) * group_size) with group_size > 0, else consecutive rows
// with the same prompt (the tokens before the first response target; a row without response
// tokens has none to compare and starts its own run). With n runs, rank r of `world` takes runs
// [n * r / world, n * (r + 1) / world), returned as its rows [first, second) (empty: none). The
// ranks' rows partition [lo, hi) in rank order.
std::pair<int64_t, int64_t> rank_rows(const SequenceBatch& batch, int64_t lo, int64_t hi,
                                      int64_t group_size, int rank, int world);

// The owner rank of each tensor: whole tensors, the largest first, each to the rank holding the
// fewest elements so far (ties: the lowest rank). The same on every rank for the same shapes.
std::vector<int> partition_by_numel(const std::vector<torch::Tensor>& tensors, int world);

// In place: every parameter's gradient becomes its sum over the ranks (a parameter without one
// gets a zero gradient first). One flat buffer per dtype.
Status all_reduce_gradients(tst::Collective& c, const std::vector<torch::Tensor>& params);

// In place, without autograd: tensors[i] becomes rank owner[i]'s (owner: (P,)).
Status broadcast_from_owners(tst::Collective& c, const std::vector<torch::Tensor>& tensors,
                             const std::vector<int>& owner);

// In place: `t` (contiguous) becomes rank `root`'s.
Status broadcast_tensor(tst::Collective& c, torch::Tensor& t, int root);

// Every rank's `row` (k,) stacked: (W, k), on every rank, row r rank r's.
StatusOr<torch::Tensor> gather_rows(tst::Collective& c, const torch::Tensor& row);

// Rank 0's batch and advantages (B,) on every rank: rank 0 passes its own and keeps them, the
// others get tensors of rank 0's shapes and dtypes on the CPU.
Status broadcast_batch(tst::Collective& c, SequenceBatch* batch, torch::Tensor* advantages);

// A checksum of the tensors' bits (int64, the same for bitwise-equal tensors whatever the
// threads or summation order): each tensor's 16- or 32-bit words summed, tensor i weighted i+1.
int64_t bit_checksum(const std::vector<torch::Tensor>& tensors);

// Bytes of AdamW moment tensors `optimizer` holds (exp_avg, exp_avg_sq, max_exp_avg_sq).
int64_t adam_state_bytes(torch::optim::AdamW& optimizer);

// Rank 0's `full` (an AdamW over `params`; null on the other ranks) receives every parameter's
// state from its owner's `own` (an AdamW over the parameters it owns); a parameter whose owner
// has taken no step gets none.
Status gather_adam_state(tst::Collective& c, const std::vector<torch::Tensor>& params,
                         const std::vector<int>& owner, torch::optim::AdamW& own,
                         torch::optim::AdamW* full);

// The reverse: each owner's `own` receives its parameters' state from rank 0's `full`.
Status scatter_adam_state(tst::Collective& c, const std::vector<torch::Tensor>& params,
                          const std::vector<int>& owner, torch::optim::AdamW& own,
                          torch::optim::AdamW* full);

// This process's peak resident memory (getrusage), bytes.
int64_t peak_rss_bytes();

}  // namespace tlt::rl
