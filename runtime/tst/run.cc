#include "runtime/tst/run.h"

#include <filesystem>

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

// The training loop of run_pretraining, once the trainer is built.
StatusOr<std::vector<Point>> train(const RunPlan& plan, TSTTrainer& trainer, bool writes,
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
    }
    on_point(p);
  }
  return evaluated;
}

StatusOr<std::vector<Point>> run(const RunPlan& plan, std::vector<std::vector<int32_t>> train_docs,
                                 std::vector<std::vector<int32_t>> held_out_docs,
                                 const std::function<void(const Point&)>& on_point,
                                 Collective* group) {
  StatusOr<model::ModelConfig> config = model::preset_config(plan.preset, plan.vocab);
  if (!config.ok()) return config.status();
  if (plan.positions > config->max_seq) {
    return Status::InvalidArgument("seqLen " + std::to_string(plan.positions) +
                                   " exceeds the preset's " + std::to_string(config->max_seq));
  }
  if (train_docs.empty() || held_out_docs.empty()) {
    return Status::InvalidArgument("need training and held-out documents");
  }
  if (group && plan.batch < group->world()) {
    return Status::InvalidArgument("batchSize " + std::to_string(plan.batch) + " is less than " +
                                   std::to_string(group->world()) +
                                   " data-parallel workers: each needs a row; raise batchSize or "
                                   "lower workers.replicas");
  }
  torch::manual_seed(plan.seed);
  TSTTrainer trainer(model::Transformer(*config), PackedStream(std::move(train_docs), plan.seed),
                     PackedStream(std::move(held_out_docs), 7), trainer_options(plan), group);
  std::error_code ec;
  if (plan.resume && !plan.checkpoint_dir.empty() &&
      std::filesystem::exists(plan.checkpoint_dir + "/model.ckpt", ec)) {
    TLT_RETURN_IF_ERROR(trainer.load(plan.checkpoint_dir));
  }
  TLT_RETURN_IF_ERROR(trainer.synchronise());
  return train(plan, trainer, !group || group->rank() == 0, on_point);
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
