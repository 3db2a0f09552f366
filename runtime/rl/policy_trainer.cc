#include "runtime/rl/policy_trainer.h"

#include <algorithm>
#include <chrono>

#include "runtime/model/checkpoint.h"
#include "runtime/model/precision.h"
#include "runtime/rl/grpo.h"
#include "runtime/rl/trainer_shards.h"
#include "runtime/tst/group.h"

namespace tlt::rl {

PolicyTrainer::PolicyTrainer(model::Transformer policy, model::Transformer reference,
                             GrpoOptions options, tst::DataParallelGroup* group)
    : policy_(std::move(policy)),
      reference_(std::move(reference)),
      options_(options),
      group_(group && group->world() > 1 ? group : nullptr) {
  params_ = model::trainable_parameters(policy_);  // a tied LM head steps through the embedding
  owner_ = partition_by_numel(params_, world());
  std::vector<torch::Tensor> mine;
  for (size_t i = 0; i < params_.size(); ++i)
    if (owner_[i] == rank()) mine.push_back(params_[i]);
  optimizer_ = std::make_unique<torch::optim::AdamW>(
      mine, torch::optim::AdamWOptions(options_.learning_rate).weight_decay(0.0));
}

PolicyTrainer::~PolicyTrainer() = default;

namespace {

// One micro-batch of a minibatch with the frozen log-probabilities its loss compares against.
struct Chunk {
  SequenceBatch seq;                 // tokens (b, t), targets and mask (b, t-1)
  torch::Tensor rows;                // (b,) int64 indices into the step's batch
  torch::Tensor advantages;          // (b,)
  torch::Tensor logp_old, logp_ref;  // (b, t-1), no grad; logp_old undefined: see update()
  int64_t shared = 0, group = -1;    // MicroBatch::shared and group: its group's prefix, run once
  int64_t positions = 0;  // positions its own forward runs (b * (t-1), less any shared prefix)
};

// The prefix of the group the chunks in hand belong to, run once for all of them.
struct GroupPrefix {
  int64_t group = -1;
  model::SharedPrefix prefix;
  // The prefix's keys and values under `m` for chunk c's group: run when c starts another
  // group. Null for a chunk outside any group.
  const model::SharedPrefix* of(model::Transformer& m, const Chunk& c) {
    if (c.group < 0) return nullptr;
    if (c.group != group) {
      prefix = run_prefix(m, c.seq.tokens[0].narrow(0, 0, c.shared));
      group = c.group;
    }
    return &prefix;
  }
};

// This rank's share of one minibatch, and the whole minibatch's size its losses are weighed by.
struct Minibatch {
  std::vector<Chunk> chunks;
  double tokens = 0.0, rows = 0.0;  // response tokens and rows of the minibatch, every rank's
};

// Minibatch k of m holds rows [B*k/m, B*(k+1)/m), this rank's share of them (rank_rows)
// micro-batched by the token budget; planned on the CPU, each chunk's tensors then on `device`
// (the policy's), moved once for its forwards.
std::vector<Minibatch> make_chunks(const SequenceBatch& batch, const torch::Tensor& advantages,
                                   int64_t m, const GrpoOptions& o, const torch::Device& device,
                                   int rank, int world) {
  const int64_t max_tokens = o.max_tokens_per_microbatch;
  const bool share_prompts = o.share_prompts;
  int64_t b = batch.tokens.size(0);
  std::vector<Minibatch> out(static_cast<size_t>(m));
  for (int64_t k = 0; k < m; ++k) {
    const int64_t lo = b * k / m, hi = b * (k + 1) / m;
    out[k].tokens = batch.mask.narrow(0, lo, hi - lo).sum().item<double>();
    out[k].rows = double(hi - lo);
    auto [first, last] = rank_rows(batch, lo, hi, o.group_size, rank, world);
    if (first >= last) continue;  // a rank without a group in this minibatch
    for (const MicroBatch& mb : plan_microbatches(batch, first, last, max_tokens, share_prompts)) {
      Chunk c;
      torch::Tensor rows_here = torch::tensor(mb.rows, torch::kInt64);  // (b,)
      c.advantages = advantages.index_select(0, rows_here).to(device);  // (b,)
      c.rows = rows_here.to(device);                                    // (b,)
      c.seq = gather_rows(batch, mb);
      c.shared = mb.shared, c.group = mb.group;
      int64_t rows = c.seq.tokens.size(0), t1 = c.seq.targets.size(1);
      // Outside a group, sequence_logprobs still shares whatever prefix all rows have.
      int64_t q = c.group >= 0 ? c.shared : share_prompts ? shared_prefix_length(c.seq) : 0;
      c.positions = c.group >= 0            ? rows * (t1 - q)
                    : q >= kMinSharedPrefix ? q + rows * (t1 - q)
                                            : rows * t1;
      c.seq = to_device(c.seq, device);
      out[k].chunks.push_back(std::move(c));
    }
  }
  return out;
}

// A group's prefix run once with its autograd history, and leaves detached from it that the
// group's micro-batches attend to: each micro-batch's backward stops at the leaves, adding up
// their gradients, and finish() takes the prefix's backward once with the sums.
class PrefixForTraining {
 public:
  // The leaves for chunk c (null outside a group); runs the prefix when c starts another group,
  // finishing the previous one first. Returns the prefix positions run (0 if none).
  int64_t start(model::Transformer& policy, const Chunk& c, bool bfloat16) {
    if (c.group == run_.group) return 0;
    finish();
    if (c.group < 0) return 0;
    {
      model::Bfloat16Autocast mixed(policy->lm_head->weight.device(), bfloat16);
      run_.of(policy, c);
    }
    for (size_t l = 0; l < run_.prefix.k.size(); ++l) {
      leaves_.k.push_back(run_.prefix.k[l].detach().requires_grad_());
      leaves_.v.push_back(run_.prefix.v[l].detach().requires_grad_());
    }
    return c.shared;
  }
  const model::SharedPrefix* leaves() const { return run_.group >= 0 ? &leaves_ : nullptr; }
  // Backpropagates the leaves' gradients through the prefix's forward (into the weights).
  void finish() {
    const model::SharedPrefix& p = run_.prefix;
    std::vector<torch::Tensor> outputs, grads;
    for (size_t l = 0; l < p.k.size(); ++l) {
      for (auto [out, leaf] : {std::pair{p.k[l], leaves_.k[l]}, {p.v[l], leaves_.v[l]}}) {
        if (leaf.grad().defined()) outputs.push_back(out), grads.push_back(leaf.grad());
      }
    }
    if (!outputs.empty()) torch::autograd::backward(outputs, grads);
    run_ = {}, leaves_ = {};
  }

 private:
  GroupPrefix run_;  // the group's prefix with its autograd history
  model::SharedPrefix leaves_;
};

// A minibatch's forwards and backwards over this rank's micro-batches, gradients accumulated
// into the policy's (zeroed by the caller); the optimizer step is the caller's.
UpdateStats minibatch_backward(model::Transformer& policy, const GrpoOptions& o,
                               const Minibatch& minibatch, bool may_cancel) {
  // The minibatch's loss is sum_tokens(...) / n over all its response tokens (every rank's); a
  // micro-batch's grpo_loss divides by its own n_c, so it is weighted by n_c / n before the
  // backward. Under the sequence mean the loss's weights count rows instead; KL and clip
  // fraction stay token-level means either way.
  bool by_rows = o.aggregation == LossAggregation::kSequenceMean;
  const double tokens = minibatch.tokens, rows = minibatch.rows;
  UpdateStats st;
  // The weights' bfloat16 casts serve every micro-batch until the optimizer step.
  model::AutocastCacheScope casts(o.bfloat16);
  PrefixForTraining prefix;
  for (const auto& c : minibatch.chunks) {
    if (may_cancel && o.cancelled && o.cancelled()) {
      st.cancelled = true;
      return st;
    }
    st.positions += prefix.start(policy, c, o.bfloat16);
    double w_tok = double(c.seq.response_tokens) / std::max(tokens, 1.0);
    double w = by_rows ? double(c.seq.tokens.size(0)) / std::max(rows, 1.0) : w_tok;
    torch::Tensor logp_new;  // (b, t-1)
    {
      model::Bfloat16Autocast mixed(policy->lm_head->weight.device(), o.bfloat16);
      logp_new = sequence_logprobs(policy, c.seq, o.temperature, kMaxLogitsPerChunk,
                                   o.share_prompts, prefix.leaves());
    }
    // Undefined logp_old: this minibatch runs before any optimizer step of the update, so the
    // policy still has the rollout's weights and its own forward is logp_old (ratio 1).
    torch::Tensor logp_old = c.logp_old.defined() ? c.logp_old : logp_new.detach();
    GrpoLoss g = grpo_loss(logp_new, logp_old, c.logp_ref, c.advantages, c.seq.mask, o.clip,
                           o.kl_coef, o.aggregation);
    (g.loss * w).backward();
    st.loss += g.loss.item<double>() * w;
    st.kl += g.kl * w_tok;
    st.clip_fraction += g.clip_fraction * w_tok;
    st.microbatches += 1;
    st.positions += c.positions;
  }
  prefix.finish();
  return st;
}

// As Optimizer::zero_grad over every trainable parameter (not only the ones this rank steps).
void zero_gradients(const std::vector<torch::Tensor>& params) {
  for (const torch::Tensor& p : params) {
    if (!p.grad().defined()) continue;
    p.grad().detach_();
    p.grad().zero_();
  }
}

UpdateStats cancelled_at(std::chrono::steady_clock::time_point start) {
  UpdateStats st;
  st.cancelled = true;
  st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return st;
}

}  // namespace

GrpoOptions grpo_options(const api::AlgorithmSpec& a, bool bfloat16) {
  GrpoOptions o;
  o.learning_rate = a.learning_rate, o.clip = a.clip_ratio, o.kl_coef = a.kl_coef;
  o.temperature = a.temperature;
  o.aggregation = a.loss_aggregation == "sequence" ? LossAggregation::kSequenceMean
                                                   : LossAggregation::kTokenMean;
  o.bfloat16 = bfloat16;
  o.group_size = a.group_size;
  return o;
}

UpdateStats PolicyTrainer::update(const SequenceBatch& batch, const torch::Tensor& advantages) {
  if (!group_) return run_update(batch, advantages);
  UpdateStats failed;
  failed.status = post("update");
  SequenceBatch sent = batch;
  torch::Tensor adv = advantages.to(torch::kCPU);
  if (failed.status.ok()) failed.status = broadcast_batch(*group_->collective(), &sent, &adv);
  if (!failed.status.ok()) return failed;
  return run_update(sent, adv);
}

UpdateStats PolicyTrainer::run_update(const SequenceBatch& batch, const torch::Tensor& advantages) {
  auto start = std::chrono::steady_clock::now();
  tst::Collective* group = group_ ? group_->collective() : nullptr;
  UpdateStats st;
  // Every checksum_every updates, from the first: the ranks start it from the same parameters.
  if (group && options_.checksum_every > 0 && updates_ % options_.checksum_every == 0)
    st.status = check_parameters();
  if (!st.status.ok()) return st;
  ++updates_;
  int64_t b = batch.tokens.size(0);
  int64_t m = std::max<int64_t>(1, std::min(options_.minibatches, b));
  // Cancel points: before the first optimizer step only, and only without ranks (GrpoOptions).
  bool may_cancel = group == nullptr;
  std::vector<Minibatch> chunks = make_chunks(batch, advantages.cpu(), m, options_,
                                              policy_->lm_head->weight.device(), rank(), world());
  auto logprobs = [&](model::Transformer& m, const SequenceBatch& s,
                      const model::SharedPrefix* prefix = nullptr) {
    return sequence_logprobs(m, s, options_.temperature, kMaxLogitsPerChunk, options_.share_prompts,
                             prefix);
  };
  {
    // logp_old and logp_ref for every row before the first optimizer step.
    torch::NoGradGuard no_grad;
    model::Bfloat16Autocast mixed(policy_->lm_head->weight.device(), options_.bfloat16);
    policy_->eval();
    torch::Tensor all_old, all_ref;  // (B, T-1): the unsplit layout only
    if (options_.max_tokens_per_microbatch <= 0) {
      all_old = logprobs(policy_, batch);
      all_ref = logprobs(reference_, batch);
    }
    for (size_t k = 0; k < chunks.size(); ++k) {
      GroupPrefix old_prefix, ref_prefix;  // group ids are per minibatch's plan
      for (Chunk& c : chunks[k].chunks) {
        if (may_cancel && options_.cancelled && options_.cancelled()) return cancelled_at(start);
        // The first minibatch takes logp_old from its own training forward (minibatch_backward):
        // one forward fewer per micro-batch, the same values.
        if (all_old.defined()) {
          c.logp_old = all_old.index_select(0, c.rows);
        } else if (k > 0) {
          c.logp_old = logprobs(policy_, c.seq, old_prefix.of(policy_, c));
        }
        c.logp_ref = all_ref.defined() ? all_ref.index_select(0, c.rows)
                                       : logprobs(reference_, c.seq, ref_prefix.of(reference_, c));
      }
    }
  }
  policy_->train();
  for (const auto& minibatch : chunks) {
    zero_gradients(params_);
    UpdateStats one = minibatch_backward(policy_, options_, minibatch, may_cancel);
    if (one.cancelled) {
      policy_->eval();
      return cancelled_at(start);
    }
    model::fold_tied_gradient(policy_);
    if (group) st.status = all_reduce_gradients(*group, params_);
    if (!st.status.ok()) break;
    torch::nn::utils::clip_grad_norm_(policy_->parameters(), options_.grad_clip);
    optimizer_->step();
    may_cancel = false;  // the policy has moved: only the whole update is a step's state
    if (group) st.status = broadcast_from_owners(*group, params_, owner_);
    if (!st.status.ok()) break;
    st.loss += one.loss / double(m);
    st.kl += one.kl / double(m);
    st.clip_fraction += one.clip_fraction / double(m);
    st.microbatches += one.microbatches;
    st.positions += one.positions;
  }
  policy_->eval();
  if (st.status.ok()) st = gather_stats(st);
  st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return st;
}

}  // namespace tlt::rl
