#include "runtime/rl/policy_trainer.h"

#include <chrono>
#include <filesystem>

#include "runtime/model/checkpoint.h"
#include "runtime/rl/grpo.h"

namespace tlt::rl {

PolicyTrainer::PolicyTrainer(model::Transformer policy, model::Transformer reference,
                             GrpoOptions options)
    : policy_(std::move(policy)), reference_(std::move(reference)), options_(options) {
  optimizer_ = std::make_unique<torch::optim::AdamW>(
      policy_->parameters(), torch::optim::AdamWOptions(options_.learning_rate).weight_decay(0.0));
}

UpdateStats PolicyTrainer::update(const SequenceBatch& batch, const torch::Tensor& advantages) {
  auto start = std::chrono::steady_clock::now();
  int64_t b = batch.tokens.size(0);
  torch::Tensor logp_old, logp_ref;  // (B, T-1)
  {
    torch::NoGradGuard no_grad;
    policy_->eval();
    logp_old = sequence_logprobs(policy_, batch, options_.temperature);
    logp_ref = sequence_logprobs(reference_, batch, options_.temperature);
  }
  policy_->train();
  UpdateStats st;
  int64_t m = std::max<int64_t>(1, std::min(options_.minibatches, b));
  for (int64_t k = 0; k < m; ++k) {
    int64_t lo = b * k / m, hi = b * (k + 1) / m;
    SequenceBatch mb;
    mb.tokens = batch.tokens.slice(0, lo, hi);
    mb.targets = batch.targets.slice(0, lo, hi);
    mb.mask = batch.mask.slice(0, lo, hi);
    optimizer_->zero_grad();
    torch::Tensor logp_new = sequence_logprobs(policy_, mb, options_.temperature);
    GrpoLoss g = grpo_loss(logp_new, logp_old.slice(0, lo, hi), logp_ref.slice(0, lo, hi),
                           advantages.slice(0, lo, hi), mb.mask, options_.clip, options_.kl_coef);
    g.loss.backward();
    torch::nn::utils::clip_grad_norm_(policy_->parameters(), options_.grad_clip);
    optimizer_->step();
    st.loss += g.loss.item<double>() / m;
    st.kl += g.kl / m;
    st.clip_fraction += g.clip_fraction / m;
  }
  policy_->eval();
  st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return st;
}

Status PolicyTrainer::save(const std::string& dir, const std::string& metadata) const {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  TLT_RETURN_IF_ERROR(model::save_checkpoint(*policy_, dir + "/policy.ckpt", metadata));
  try {
    torch::serialize::OutputArchive archive;
    optimizer_->save(archive);
    archive.save_to(dir + "/optimizer.pt.tmp");
  } catch (const c10::Error& e) {
    return Status::Unavailable(dir + "/optimizer.pt: " + e.what_without_backtrace());
  }
  std::filesystem::rename(dir + "/optimizer.pt.tmp", dir + "/optimizer.pt", ec);
  if (ec) return Status::Unavailable(dir + "/optimizer.pt: " + ec.message());
  return Status::Ok();
}

StatusOr<std::string> PolicyTrainer::load(const std::string& dir) {
  StatusOr<std::string> meta = model::load_checkpoint(*policy_, dir + "/policy.ckpt");
  if (!meta.ok()) return meta.status();
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(dir + "/optimizer.pt");
    optimizer_->load(archive);
  } catch (const c10::Error& e) {
    return Status::Corruption(dir + "/optimizer.pt: cannot be read (" +
                              std::string(e.what_without_backtrace()).substr(0, 200) +
                              "); delete this checkpoint directory to resume from an older one");
  }
  return meta;
}

}  // namespace tlt::rl
