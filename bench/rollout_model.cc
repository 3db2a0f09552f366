#include "bench/rollout_model.h"

#include <cstdio>
#include <iostream>
#include <set>

#include "bench/rollout_ceiling.h"
#include "bench/rollout_drafter.h"
#include "bench/rollout_precision.h"
#include "bench/rollout_sharing.h"
#include "runtime/clock.h"
#include "runtime/model/model_source.h"
#include "runtime/model/pretrained.h"
#include "runtime/rl/drafter_on_generations.h"  // rl::task_requests
#include "runtime/rl/model_codec.h"
#include "runtime/rollout/generate_pretrained.h"
#include "runtime/torch_env.h"

namespace tlt::bench {

namespace {

// Loads --model PATH onto `device` and prints what it is, its load time and peak RSS; the loader's
// error.
StatusOr<model::PretrainedModel> load_model(const std::string& path, int threads,
                                            const std::string& device) {
  double t0 = runtime::now_s();
  StatusOr<model::PretrainedModel> m = model::load_pretrained(path);
  if (!m.ok()) return m.status().with_context("--model");
  const model::ModelConfig& c = m->config.config;
  int64_t params = 0;
  std::set<const void*> seen;  // a tied LM head is the embedding: count it once
  for (const auto& p : m->model->parameters())
    if (seen.insert(p.data_ptr()).second) params += p.numel();
  std::printf(
      "model=%s architecture=%s layers=%lld dim=%lld vocab=%lld parameters=%lld "
      "threads=%d\nload_seconds=%.2f peak_rss_mb_after_load=%lld\n",
      path.c_str(), m->config.architecture.c_str(), (long long)c.n_layers, (long long)c.dim,
      (long long)c.vocab, (long long)params, threads, runtime::now_s() - t0,
      (long long)(rollout::peak_rss_bytes() >> 20));
  m->model->to(torch::Device(device));  // its caches, drafters and engines follow
  m->model->eval();
  return m;
}

// The task a --model run decodes: an RLJob's default (arithmetic-cot, task seed 1).
constexpr const char* kModelTask = "arithmetic-cot";
constexpr uint64_t kModelTaskSeed = 1;

// A --model run's task and the model's codec (its tokenizer and chat template).
struct ModelTask {
  std::unique_ptr<rl::Task> task;
  std::unique_ptr<rl::ModelCodec> codec;
};

StatusOr<ModelTask> open_task(const std::string& path, model::Transformer target) {
  StatusOr<model::ModelSource> source = model::resolve_model_source(path, "auto");
  if (!source.ok()) return source.status().with_context("--model");
  StatusOr<std::unique_ptr<rl::ModelCodec>> codec =
      rl::ModelCodec::load(*source, target->config().vocab);
  if (!codec.ok()) return codec.status().with_context("--model");
  StatusOr<std::unique_ptr<rl::Task>> task = rl::make_task(kModelTask, kModelTaskSeed);
  if (!task.ok()) return task.status().with_context("--model");
  return ModelTask{std::move(*task), std::move(*codec)};
}

// The task's held-out problems from `offset` on, each asked t.group times, rendered through the
// model's chat template, sampled at `temperature`.
RequestMaker task_requests(const ModelTask& mt, const Table& t, double temperature) {
  rl::TaskRequestOptions ro;
  ro.max_new_tokens = t.max_new, ro.max_seq = t.decode.max_seq, ro.temperature = temperature;
  return [&mt, ro, group = std::max(1, t.group)](
             int n, int offset) -> StatusOr<std::vector<rollout::Request>> {
    StatusOr<std::vector<rollout::Request>> base =
        rl::task_requests(*mt.task, *mt.codec, uint64_t(offset), (n + group - 1) / group, true, ro);
    if (!base.ok()) return base.status();
    std::vector<rollout::Request> out;
    for (int i = 0; i < n; ++i) {
      out.push_back((*base)[size_t(i / group)]);
      out.back().id = i, out.back().seed = uint64_t(i);
    }
    return out;
  };
}

// Prints `s` on stderr; the process's exit code for it.
int fail(const Status& s) {
  std::cerr << s.to_string() << "\n";
  return 1;
}

}  // namespace

int model_ceiling(const RolloutOptions& o) {
  runtime::configure_threads(o.table.threads);
  StatusOr<model::PretrainedModel> m = load_model(o.model_path, o.table.threads, o.device);
  if (!m.ok()) return fail(m.status());
  print_model_ceiling(m->model, o.table.batches, o.ceiling_context, o.table.decode.bfloat16);
  print_update_precision(m->model);
  Status drafter_step = print_drafter_precision(m->model);
  if (!drafter_step.ok()) return fail(drafter_step);
  print_update_sharing(m->model);
  std::printf("peak_rss_mb=%lld\n", (long long)(rollout::peak_rss_bytes() >> 20));
  return 0;
}

int model_compare(const RolloutOptions& o) {
  runtime::configure_threads(o.prepare_only ? 0 : o.table.threads);
  StatusOr<model::PretrainedModel> m = load_model(o.model_path, o.table.threads, o.device);
  if (!m.ok()) return fail(m.status());
  model::Transformer target = m->model;
  Table t = o.table;
  // Prompt + response + drafts; a model of shorter context (the tiny test checkpoints) gets its
  // own.
  t.decode.max_seq = std::min<int64_t>(t.decode.max_seq, target->config().max_seq);
  if (!o.prepare_only) print_model_ceiling(target, t.batches, o.ceiling_context, t.decode.bfloat16);
  StatusOr<ModelTask> mt = open_task(o.model_path, target);
  if (!mt.ok()) return fail(mt.status());
  DrafterSource source{mt->task.get(), mt->codec.get(), model::model_identity(o.model_path),
                       std::string(kModelTask) + "-" + std::to_string(kModelTaskSeed),
                       "the model's"};
  StatusOr<std::vector<NamedDrafter>> drafters = warm_start_drafters(o, target, source, t);
  if (!drafters.ok()) return fail(drafters.status());
  if (o.prepare_only) return 0;
  print_precision(target, t);
  std::vector<SummaryRow> summary;
  int lost = 0;
  for (double temperature : o.temperatures) {
    t.temperature = temperature;
    StatusOr<int> l = compare(target, *drafters, t, task_requests(*mt, t, temperature), &summary);
    if (!l.ok()) return fail(l.status());
    lost += *l;
  }
  if (o.temperatures.size() > 1 || drafters->size() > 1) print_summary(summary, o.temperatures);
  if (lost > 0) std::printf("%d runs differ from plain decoding: not lossless\n", lost);
  return lost == 0 ? 0 : 1;
}

}  // namespace tlt::bench
