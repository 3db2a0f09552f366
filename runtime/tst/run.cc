#include "runtime/tst/run.h"

#include <filesystem>

#include "runtime/tst/trainer.h"

namespace tlt::tst {

StatusOr<std::vector<Point>> run_pretraining(const RunPlan& plan,
                                             std::vector<std::vector<int32_t>> train_docs,
                                             std::vector<std::vector<int32_t>> held_out_docs,
                                             const std::function<void(const Point&)>& on_point) {
  StatusOr<model::ModelConfig> config = model::preset_config(plan.preset, plan.vocab);
  if (!config.ok()) return config.status();
  if (plan.positions > config->max_seq) {
    return Status::InvalidArgument("seqLen " + std::to_string(plan.positions) +
                                   " exceeds the preset's " + std::to_string(config->max_seq));
  }
  if (train_docs.empty() || held_out_docs.empty()) {
    return Status::InvalidArgument("need training and held-out documents");
  }
  TrainerOptions o;
  o.schedule.steps = plan.steps, o.schedule.warmup = plan.warmup;
  o.schedule.decay_fraction = plan.decay_fraction, o.schedule.peak_lr = plan.learning_rate;
  o.schedule.superposition = plan.superposition, o.schedule.ratio = plan.ratio;
  o.schedule.bag = plan.bag;
  o.batch = plan.batch, o.positions = plan.positions, o.weight_decay = plan.weight_decay;
  o.grad_clip = plan.grad_clip, o.weighting = plan.weighting, o.eval_batches = plan.eval_batches;
  torch::manual_seed(plan.seed);
  TSTTrainer trainer(model::Transformer(*config), PackedStream(std::move(train_docs), plan.seed),
                     PackedStream(std::move(held_out_docs), 7), o);
  std::error_code ec;
  if (plan.resume && !plan.checkpoint_dir.empty() &&
      std::filesystem::exists(plan.checkpoint_dir + "/model.ckpt", ec)) {
    TLT_RETURN_IF_ERROR(trainer.load(plan.checkpoint_dir));
  }
  std::vector<Point> evaluated;
  auto eval_point = [&](Point p) {
    p.eval_loss = trainer.evaluate();
    evaluated.push_back(p);
    return p;
  };
  if (trainer.steps_done() == 0) {
    Point p0;
    p0.phase = o.schedule.phase_at(0);
    on_point(eval_point(p0));
  }
  while (!trainer.finished()) {
    StepResult r = trainer.step();
    Point p{r.step + 1, r.phase, r.loss, r.lr, r.flops, r.seconds, r.tokens_seen, -1};
    bool last = trainer.finished();
    if (last || (plan.eval_every > 0 && p.step % plan.eval_every == 0)) p = eval_point(p);
    if (!plan.checkpoint_dir.empty() &&
        (last || (plan.checkpoint_every > 0 && p.step % plan.checkpoint_every == 0))) {
      TLT_RETURN_IF_ERROR(trainer.save(plan.checkpoint_dir));
    }
    on_point(p);
  }
  return evaluated;
}

}  // namespace tlt::tst
