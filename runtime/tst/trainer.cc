#include "runtime/tst/trainer.h"

#include <chrono>
#include <filesystem>
#include <fstream>

#include "runtime/model/checkpoint.h"
#include "runtime/tst/flops.h"
#include "runtime/tst/superposition.h"

namespace tlt::tst {

TSTTrainer::TSTTrainer(model::Transformer model, PackedStream train, PackedStream held_out,
                       TrainerOptions options)
    : model_(std::move(model)), train_(std::move(train)), options_(std::move(options)) {
  optimizer_ = std::make_unique<torch::optim::AdamW>(
      model_->parameters(), torch::optim::AdamWOptions(options_.schedule.peak_lr)
                                .betas({0.9, 0.95})
                                .weight_decay(options_.weight_decay));
  int64_t rows = options_.eval_batches * options_.batch;
  std::vector<int64_t> ev = held_out.next(rows, options_.positions, 1);
  eval_rows_ = torch::tensor(ev, torch::kInt64).view({rows, options_.positions});
}

namespace {
double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Loss of rows (B, s*L) with bag size s; s = 1 is next-token training.
torch::Tensor rows_loss(model::Transformer& m, const torch::Tensor& rows, int64_t s,
                        const torch::Tensor& weights) {
  int64_t b = rows.size(0), l = rows.size(1) / s;
  torch::Tensor x = bag_embeddings(m->embed, rows, s);  // (B, L, C)
  torch::Tensor pos = torch::arange(l, torch::kInt64).view({1, l}).expand({b, l});
  torch::Tensor logits = m->forward_embeddings(x, pos).logits;  // (B, L, V)
  return multi_hot_ce(logits, bag_labels(rows, s), weights);
}
}  // namespace

StepResult TSTTrainer::step() {
  double start = now();
  const Schedule& sc = options_.schedule;
  StepResult r;
  r.step = step_;
  r.phase = sc.phase_at(step_);
  r.bag = sc.bag_at(step_);
  r.lr = sc.lr(step_);
  for (auto& group : optimizer_->param_groups()) {
    static_cast<torch::optim::AdamWOptions&>(group.options()).lr(r.lr);
  }
  std::vector<int64_t> raw = train_.next(options_.batch, options_.positions * r.bag, r.bag);
  torch::Tensor rows = torch::tensor(raw, torch::kInt64).view({options_.batch, -1});
  model_->train();
  optimizer_->zero_grad();
  torch::Tensor loss =
      rows_loss(model_, rows, r.bag, bag_weights(r.bag, options_.weighting, torch::kFloat32));
  loss.backward();
  if (options_.grad_clip > 0)
    torch::nn::utils::clip_grad_norm_(model_->parameters(), options_.grad_clip);
  optimizer_->step();
  r.loss = loss.item<double>();
  flops_ += train_step_flops(model_->config(), options_.batch, options_.positions);
  r.flops = flops_;
  r.tokens_seen = train_.tokens_read();
  ++step_;
  r.seconds = now() - start;
  return r;
}

double TSTTrainer::evaluate() {
  torch::NoGradGuard no_grad;
  model_->eval();
  double total = 0;
  int64_t n = eval_rows_.size(0) / options_.batch;
  torch::Tensor w = bag_weights(1, "uniform", torch::kFloat32);
  for (int64_t i = 0; i < n; ++i) {
    total += rows_loss(model_, eval_rows_.narrow(0, i * options_.batch, options_.batch), 1, w)
                 .item<double>();
  }
  return total / double(std::max<int64_t>(n, 1));
}

Status TSTTrainer::save(const std::string& dir) const {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::string meta = "step=" + std::to_string(step_) + " flops=" + std::to_string(flops_) +
                     " stream=" + train_.state();
  TLT_RETURN_IF_ERROR(model::save_checkpoint(*model_, dir + "/model.ckpt", meta));
  try {
    torch::serialize::OutputArchive archive;
    optimizer_->save(archive);
    archive.save_to(dir + "/optimizer.pt");
  } catch (const c10::Error& e) {
    return Status::Unavailable(dir + "/optimizer.pt: " + e.what_without_backtrace());
  }
  return Status::Ok();
}

Status TSTTrainer::load(const std::string& dir) {
  StatusOr<std::string> meta = model::load_checkpoint(*model_, dir + "/model.ckpt");
  if (!meta.ok()) return meta.status();
  long long step = 0;
  double flops = 0;
  char stream_state[256] = {0};
  if (std::sscanf(meta->c_str(), "step=%lld flops=%lf stream=%255[^\n]", &step, &flops,
                  stream_state) != 3 ||
      !train_.restore(stream_state)) {
    return Status::Corruption(dir + "/model.ckpt: metadata \"" + *meta + "\" is not a TST state");
  }
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(dir + "/optimizer.pt");
    optimizer_->load(archive);
  } catch (const c10::Error& e) {
    return Status::Corruption(dir + "/optimizer.pt: " + e.what_without_backtrace());
  }
  step_ = step;
  flops_ = flops;
  return Status::Ok();
}

}  // namespace tlt::tst
