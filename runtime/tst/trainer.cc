#include "runtime/tst/trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "runtime/model/checkpoint.h"
#include "runtime/model/precision.h"
#include "runtime/tst/flops.h"
#include "runtime/tst/superposition.h"
#include "runtime/io/atomic_file.h"

namespace tlt::tst {

TSTTrainer::TSTTrainer(model::Transformer model, PackedStream train, PackedStream held_out,
                       TrainerOptions options, Collective* group)
    : model_(std::move(model)),
      train_(std::move(train)),
      options_(std::move(options)),
      group_(group) {
  // A tied LM head is stepped through the embedding (model::fold_tied_gradient).
  params_ = model::trainable_parameters(model_);
  optimizer_ = std::make_unique<torch::optim::AdamW>(
      params_, torch::optim::AdamWOptions(options_.schedule.peak_lr)
                   .betas({0.9, 0.95})
                   .weight_decay(options_.weight_decay));
  int64_t rows = options_.eval_batches * options_.batch;
  std::vector<int64_t> ev = held_out.next(rows, options_.positions, 1);
  // On the model's device, as every training batch (step()).
  eval_rows_ = torch::tensor(ev, torch::kInt64).view({rows, options_.positions}).to(device());
}

namespace {
double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Logits (B, L, V) of rows (B, s*L) with bag size s; s = 1 is next-token training. With
// `bfloat16` the products run in bfloat16 and the logits come back in the model's dtype.
torch::Tensor rows_logits(model::Transformer& m, const torch::Tensor& rows, int64_t s,
                          bool bfloat16) {
  int64_t b = rows.size(0), l = rows.size(1) / s;
  torch::Tensor x = bag_embeddings(m->embed, rows, s);  // (B, L, C)
  torch::Tensor pos =
      torch::arange(l, torch::dtype(torch::kInt64).device(x.device())).view({1, l}).expand({b, l});
  model::Bfloat16Autocast mixed(x.device(), bfloat16);
  return m->forward_embeddings(x, pos).logits.to(x.scalar_type());  // (B, L, V)
}

// Mean loss of rows (B, s*L).
torch::Tensor rows_loss(model::Transformer& m, const torch::Tensor& rows, int64_t s,
                        const torch::Tensor& weights, bool bfloat16) {
  return multi_hot_ce(rows_logits(m, rows, s, bfloat16), bag_labels(rows, s), weights);
}

// A (1) float64 tensor on `like`'s device (the collectives' device).
torch::Tensor scalar(double v, const torch::Tensor& like) {
  return torch::full({1}, v, torch::TensorOptions().dtype(torch::kFloat64).device(like.device()));
}
}  // namespace

Status TSTTrainer::synchronise() {
  if (!group_) return Status::Ok();
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> params = model_->parameters();
  torch::Tensor mine = torch::tensor({double(step_), double(options_.schedule.steps),
                                      double(options_.batch), double(options_.positions)},
                                     torch::kFloat64)
                           .to(params[0].device());  // (4)
  torch::Tensor root = mine.clone();                 // (4)
  TLT_RETURN_IF_ERROR(group_->broadcast(root, 0));
  torch::Tensor differ = scalar(torch::equal(mine, root) ? 0.0 : 1.0, params[0]);  // (1)
  TLT_RETURN_IF_ERROR(group_->all_reduce_sum(differ));
  if (differ.item<double>() > 0) {
    auto at = [](const torch::Tensor& t) {
      return "step " + std::to_string(t[0].item<int64_t>()) + " of (steps " +
             std::to_string(t[1].item<int64_t>()) + ", batch " +
             std::to_string(t[2].item<int64_t>()) + ", seqLen " +
             std::to_string(t[3].item<int64_t>()) + ")";
    };
    return Status::FailedPrecondition(
        "data-parallel ranks disagree: rank " + std::to_string(group_->rank()) + " is at " +
        at(mine.cpu()) + ", rank 0 at " + at(root.cpu()) +
        "; every worker must run the same job and see the same checkpoint.path");
  }
  for (torch::Tensor& p : params) {
    torch::Tensor d = p.detach();  // shares p's storage
    TLT_RETURN_IF_ERROR(group_->broadcast(d, 0));
  }
  return Status::Ok();
}

StatusOr<double> TSTTrainer::all_reduce_gradients(const torch::Tensor& loss) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor>& params = params_;
  std::vector<torch::Tensor> parts;
  for (const torch::Tensor& p : params) {
    parts.push_back(p.grad().defined() ? p.grad().reshape({-1})
                                       : torch::zeros({p.numel()}, p.options()));
  }
  parts.push_back(loss.detach().to(params[0].dtype()).reshape({-1}));
  torch::Tensor flat = torch::cat(parts);  // (sum of numel + 1)
  TLT_RETURN_IF_ERROR(group_->all_reduce_sum(flat));
  int64_t offset = 0;
  for (torch::Tensor& p : params) {
    torch::Tensor g = flat.narrow(0, offset, p.numel()).view_as(p);  // p's shape
    if (p.grad().defined()) {
      p.mutable_grad().copy_(g);
    } else {
      p.mutable_grad() = g.clone();
    }
    offset += p.numel();
  }
  return flat[offset].item<double>();
}

StatusOr<double> TSTTrainer::backward(const torch::Tensor& rows, int64_t s) {
  torch::Tensor w = bag_weights(s, options_.weighting, torch::kFloat32);  // (s)
  if (!group_) {
    torch::Tensor loss = rows_loss(model_, rows, s, w, options_.bfloat16);
    loss.backward();
    model::fold_tied_gradient(model_);
    return loss.item<double>();
  }
  torch::Tensor labels = bag_labels(rows, s);  // (B_r, L, s)
  torch::Tensor scored = scalar(double(scored_positions(labels)), model_->parameters()[0]);  // (1)
  if (!options_.local_normalisation) TLT_RETURN_IF_ERROR(group_->all_reduce_sum(scored));
  double n = std::max(scored.item<double>(), 1.0);         // scored positions of the global batch
  if (options_.local_normalisation) n *= group_->world();  // the mean of local means: wrong
  torch::Tensor loss =
      multi_hot_ce_sum(rows_logits(model_, rows, s, options_.bfloat16), labels, w) / n;
  loss.backward();
  model::fold_tied_gradient(model_);
  return all_reduce_gradients(loss);
}

StepResult TSTTrainer::step() {
  double start = now();
  const Schedule& sc = options_.schedule;
  StepResult r;
  r.step = step_;
  r.phase = sc.phase_at(step_);
  r.bag = sc.bag_at(step_);
  r.lr = sc.lr(step_);
  r.loss = std::nan("");
  if (!status_.ok()) return r;
  for (auto& group : optimizer_->param_groups()) {
    static_cast<torch::optim::AdamWOptions&>(group.options()).lr(r.lr);
  }
  // The global batch, read on every rank so that all streams stay at the same position.
  std::vector<int64_t> raw = train_.next(options_.batch, options_.positions * r.bag, r.bag);
  torch::Tensor rows =
      torch::tensor(raw, torch::kInt64).view({options_.batch, -1}).to(device());  // (B, s*L)
  if (group_) rows = shard_rows(rows, group_->rank(), group_->world());           // (B_r, s*L)
  model_->train();
  optimizer_->zero_grad();
  StatusOr<double> loss = backward(rows, r.bag);
  if (!loss.ok()) {
    status_ = loss.status();
    return r;
  }
  if (options_.grad_clip > 0)  // after the allreduce: the global batch's gradient norm
    torch::nn::utils::clip_grad_norm_(params_, options_.grad_clip);
  optimizer_->step();
  r.loss = *loss;
  flops_ += train_step_flops(model_->config(), options_.batch, options_.positions);
  r.flops = flops_;
  r.tokens_seen = train_.tokens_read();
  ++step_;
  r.seconds = now() - start;
  return r;
}

double TSTTrainer::evaluate() {
  if (!status_.ok()) return std::nan("");
  torch::NoGradGuard no_grad;
  model_->eval();
  double total = 0;
  int64_t n = eval_rows_.size(0) / options_.batch;
  int rank = group_ ? group_->rank() : 0, world = group_ ? group_->world() : 1;
  torch::Tensor w = bag_weights(1, "uniform", torch::kFloat32);  // (1)
  for (int64_t i = rank; i < n; i += world) {                    // batch i on rank i mod R
    total += rows_loss(model_, eval_rows_.narrow(0, i * options_.batch, options_.batch), 1, w,
                       options_.bfloat16)
                 .item<double>();
  }
  if (group_) {
    torch::Tensor sum = scalar(total, model_->parameters()[0]);  // (1)
    status_ = group_->all_reduce_sum(sum);
    if (!status_.ok()) return std::nan("");
    total = sum.item<double>();
  }
  return total / double(std::max<int64_t>(n, 1));
}

Status TSTTrainer::save(const std::string& dir) const {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::string meta = "step=" + std::to_string(step_) + " flops=" + std::to_string(flops_) +
                     " stream=" + train_.state();
  TLT_RETURN_IF_ERROR(model::save_checkpoint(*model_, dir + "/model.ckpt", meta));
  return io::atomic_write(dir + "/optimizer.pt", [&](std::ostream& out) {
    torch::serialize::OutputArchive archive;
    optimizer_->save(archive);
    archive.save_to(out);
    return Status::Ok();
  });
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
    // The optimizer's state on the model's device, wherever the checkpoint was written.
    archive.load_from(dir + "/optimizer.pt", device());
    optimizer_->load(archive);
  } catch (const c10::Error& e) {
    return Status::Corruption(dir + "/optimizer.pt: " + e.what_without_backtrace());
  }
  step_ = step;
  flops_ = flops;
  return Status::Ok();
}

}  // namespace tlt::tst
