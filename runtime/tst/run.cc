#include "runtime/tst/run.h"

#include <filesystem>

#include "runtime/device/device.h"
#include "runtime/model/precision.h"
#include "runtime/model/pretrained.h"
#include "runtime/tst/data_parallel.h"
#include "runtime/tst/trainer.h"

namespace tlt::tst {
namespace {

TrainerOptions trainer_options(const RunPlan& plan) {
  TrainerOptions o;
  o.schedule.steps = plan.steps, o.schedule.warmup = plan.warmup;
  o.schedule.decay_fraction = plan.decay_fraction, o.schedule.peak_lr = plan.learning_rate;
  o.schedule.superposition = plan.superposition, o.schedule.ratio = plan.ratio;
  o.schedule.bag = plan.bag;
  o.batch = plan.batch, o.positions = plan.positions, o.weight_decay = plan.weight_decay;
  o.grad_clip = plan.grad_clip, o.weighting = plan.weighting, o.eval_batches = plan.eval_batches;
  return o;
}

// The model a run starts from: the preset, or spec.model.path's model; the card names it.
StatusOr<model::SourcedModel> initial_model(const RunPlan& plan) {
  model::SourcedModel m;
  if (plan.model_path.empty()) {
    StatusOr<model::ModelConfig> config = model::preset_config(plan.preset, plan.vocab);
    if (!config.ok()) return config.status();
    m.card.config.architecture = "llama";
    m.card.config.config = *config;
    m.model = model::Transformer(*config);
    m.pretrained = false;
  } else {
    StatusOr<model::ModelSource> source =
        model::resolve_model_source(plan.model_path, plan.model_format);
    if (!source.ok()) return source.status().with_context("spec.model.path");
    StatusOr<model::SourcedModel> loaded = model::load_model(*source);
    if (!loaded.ok()) return loaded.status().with_context("spec.model.path");
    m = std::move(*loaded);
  }
  m.card.tokenizer = plan.tokenizer_source;
  const model::ModelConfig& c = m.card.config.config;
  if (plan.vocab > c.vocab) {
    return Status::InvalidArgument(
        "the data's tokenizer has " + std::to_string(plan.vocab) +
        " ids but the model's embedding has " + std::to_string(c.vocab) +
        " rows: use the model's own tokenizer (leave spec.data.tokenizer.path empty) or one whose "
        "vocabulary fits");
  }
  if (plan.positions > c.max_seq) {
    return Status::InvalidArgument("spec.training.seqLen " + std::to_string(plan.positions) +
                                   " exceeds the model's context of " + std::to_string(c.max_seq));
  }
  return m;
}

// The training loop of run_pretraining, once the trainer is built.
StatusOr<std::vector<Point>> train(const RunPlan& plan, const model::ModelCard& card,
                                   TSTTrainer& trainer, bool writes,
                                   const std::function<void(const Point&)>& on_point) {
  std::vector<Point> evaluated;
  auto eval_point = [&](Point p) {
    p.eval_loss = trainer.evaluate();
    evaluated.push_back(p);
    return p;
  };
  if (trainer.steps_done() == 0) {
    Point p0;
    p0.phase = trainer_options(plan).schedule.phase_at(0);
    p0 = eval_point(p0);
    TLT_RETURN_IF_ERROR(trainer.status());
    on_point(p0);
  }
  while (!trainer.finished()) {
    StepResult r = trainer.step();
    TLT_RETURN_IF_ERROR(trainer.status());
    Point p{r.step + 1, r.phase, r.loss, r.lr, r.flops, r.seconds, r.tokens_seen, -1};
    bool last = trainer.finished();
    if (last || (plan.eval_every > 0 && p.step % plan.eval_every == 0)) p = eval_point(p);
    TLT_RETURN_IF_ERROR(trainer.status());
    if (writes && !plan.checkpoint_dir.empty() &&
        (last || (plan.checkpoint_every > 0 && p.step % plan.checkpoint_every == 0))) {
      TLT_RETURN_IF_ERROR(trainer.save(plan.checkpoint_dir));
      TLT_RETURN_IF_ERROR(model::write_model_card(plan.checkpoint_dir, card));
    }
    on_point(p);
  }
  return evaluated;
}

StatusOr<std::vector<Point>> run(const RunPlan& plan, std::vector<std::vector<int32_t>> train_docs,
                                 std::vector<std::vector<int32_t>> held_out_docs,
                                 const std::function<void(const Point&)>& on_point,
                                 Collective* group) {
  if (train_docs.empty() || held_out_docs.empty()) {
    return Status::InvalidArgument("need training and held-out documents");
  }
  if (group && plan.batch < group->world()) {
    return Status::InvalidArgument("batchSize " + std::to_string(plan.batch) + " is less than " +
                                   std::to_string(group->world()) +
                                   " data-parallel workers: each needs a row; raise batchSize or "
                                   "lower workers.replicas");
  }
  TLT_RETURN_IF_ERROR(device::make_current(plan.device));
  torch::manual_seed(plan.seed);  // before the model: a from-scratch model's weights depend on it
  StatusOr<model::SourcedModel> m = initial_model(plan);
  if (!m.ok()) return m.status();
  // Made on the CPU and moved, so a device starts from the CPU's weights (a no-op on the CPU).
  m->model->to(torch::Device(plan.device));
  TrainerOptions options = trainer_options(plan);
  options.bfloat16 = model::use_bfloat16(plan.model_dtype, !plan.model_path.empty(),
                                         m->model->lm_head->weight.device());
  TSTTrainer trainer(m->model, PackedStream(std::move(train_docs), plan.seed),
                     PackedStream(std::move(held_out_docs), 7), options, group);
  std::error_code ec;
  if (plan.resume && !plan.checkpoint_dir.empty() &&
      std::filesystem::exists(plan.checkpoint_dir + "/model.ckpt", ec)) {
    TLT_RETURN_IF_ERROR(trainer.load(plan.checkpoint_dir));
  }
  TLT_RETURN_IF_ERROR(trainer.synchronise());
  return train(plan, m->card, trainer, !group || group->rank() == 0, on_point);
}

}  // namespace

StatusOr<std::vector<Point>> run_pretraining(const RunPlan& plan,
                                             std::vector<std::vector<int32_t>> train_docs,
                                             std::vector<std::vector<int32_t>> held_out_docs,
                                             const std::function<void(const Point&)>& on_point,
                                             Collective* group) {
  try {
    return run(plan, std::move(train_docs), std::move(held_out_docs), on_point, group);
  } catch (const c10::Error& e) {
    return Status::Internal(std::string("LibTorch: ") + e.what_without_backtrace());
  } catch (const std::exception& e) {
    return Status::Internal(e.what());
  }
}

}  // namespace tlt::tst
