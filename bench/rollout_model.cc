#include "bench/rollout_model.h"

#include <cstdio>
#include <iostream>
#include <set>

#include "runtime/data/token_file.h"
#include "runtime/drafter/trainer.h"
#include "runtime/model/model_source.h"
#include "runtime/model/precision.h"
#include "runtime/model/pretrained.h"
#include "runtime/rl/drafter_on_generations.h"
#include "runtime/rl/model_codec.h"
#include "runtime/rl/policy_trainer.h"
#include "runtime/rl/sequences.h"
#include "runtime/rollout/generate_pretrained.h"
#include "runtime/torch_env.h"

namespace tlt::bench {

namespace {

// The issue-19 table for a pretrained model: forward times of 1, 8 and 16 new tokens per request
// over a KV cache of ceiling_context + 128 positions (ceiling_context already filled; 256 and 128
// by default), and the ceiling k x T(b,1)/T(b,k) at k = 8. The fastest of 5 (each after two
// warm-ups).
void print_model_ceiling(model::Transformer target, const std::vector<int>& batches,
                         int64_t ceiling_context) {
  // A model shorter than that (the tiny test checkpoints) gets what its positions allow.
  const int64_t capacity = std::min<int64_t>(ceiling_context + 128, target->config().max_seq);
  const int64_t context = std::min<int64_t>(ceiling_context, capacity - 17);
  std::printf(
      "\nforward times, KV cache of %lld positions (%lld filled), fastest of 5:\n"
      "| batch | forward of 1 token | 8 tokens | 16 tokens | k x T(b,1)/T(b,k) at k=8 |\n"
      "|---:|---:|---:|---:|---:|\n",
      (long long)capacity, (long long)context);
  for (int b : batches) {
    double t1 = forward_seconds(target, b, 1, context, 5, capacity);
    double t8 = forward_seconds(target, b, 8, context, 5, capacity);
    double t16 = forward_seconds(target, b, 16, context, 5, capacity);
    std::printf("| %d | %.0f ms | %.0f ms | %.0f ms | %.2fx |\n", b, 1e3 * t1, 1e3 * t8, 1e3 * t16,
                8.0 * t1 / t8);
    std::fflush(stdout);
  }
}

// Loads --model PATH and prints what it is, its load time and peak RSS; the loader's error.
StatusOr<model::PretrainedModel> load_model(const std::string& path, int threads) {
  double t0 = now();
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
      (long long)c.vocab, (long long)params, threads, now() - t0,
      (long long)(rollout::peak_rss_bytes() >> 20));
  m->model->eval();
  return m;
}

// What bfloat16 products buy the policy update (spec.model.dtype): the forward and backward of
// its log-probabilities (rl::sequence_logprobs) over one micro-batch of 4 rows of 64 prompt + 192
// response tokens (the trainer's 1024-token budget; less for a model of shorter context),
// float32 against bfloat16 products, side by side, the fastest of 3 each.
void print_update_precision(model::Transformer target) {
  const int64_t row = std::min<int64_t>(256, target->config().max_seq), prompt = row / 4;
  torch::manual_seed(3);
  std::vector<std::vector<int64_t>> prompts, responses;
  for (int i = 0; i < 4; ++i) {
    torch::Tensor p = torch::randint(target->config().vocab, {prompt}, torch::kInt64);  // (P,)
    torch::Tensor r = torch::randint(target->config().vocab, {row - prompt}, torch::kInt64);
    prompts.emplace_back(p.data_ptr<int64_t>(), p.data_ptr<int64_t>() + p.numel());
    responses.emplace_back(r.data_ptr<int64_t>(), r.data_ptr<int64_t>() + r.numel());
  }
  rl::SequenceBatch batch = rl::make_batch(prompts, responses);
  auto seconds = [&](bool bf16) {
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      target->zero_grad();
      double t0 = now();
      torch::Tensor logp;  // (4, row - 1)
      {
        model::Bfloat16Autocast mixed(torch::kCPU, bf16);
        logp = rl::sequence_logprobs(target, batch, 1.0);
      }
      logp.sum().backward();
      best = std::min(best, now() - t0);
    }
    target->zero_grad();
    return best;
  };
  double f32 = seconds(false), bf16 = seconds(true);
  std::printf(
      "\npolicy update, forward + backward of %lld tokens: float32 %.2f s, bfloat16 products "
      "%.2f s = %.2fx (spec.model.dtype; native bfloat16 here: %s)\n",
      (long long)(4 * row), f32, bf16, f32 / bf16,
      model::native_bfloat16(torch::kCPU) ? "yes" : "no");
}

// What bfloat16 products buy the drafter's training (the warm start and the spot trainers, under
// spec.model.dtype): one optimizer step of a one-layer drafter at the target's width over 16
// windows of 64 positions, 3 unrolled levels and a 2048-token draft vocabulary (an RLJob's
// defaults for a real model), float32 against bfloat16 products, the fastest of 3 each after one
// warm-up step. The windows are random tokens with random target features: the cost does not
// depend on them.
void print_drafter_precision(model::Transformer target) {
  const int64_t windows = 16, len = 64, c = target->config().dim;
  const int64_t vocab = std::min<int64_t>(2048, target->config().vocab);
  torch::manual_seed(4);
  torch::Tensor tokens = torch::randint(target->config().vocab, {windows, len}, torch::kInt64);
  torch::Tensor hidden = torch::randn({windows, len, c});  // (B, T, C)
  torch::Tensor mask = torch::ones({windows, len});        // (B, T)
  auto seconds = [&](bool bf16) {
    torch::manual_seed(1);
    model::Drafter drafter(target, 1);
    Status st = drafter->set_draft_vocab(torch::arange(vocab, torch::kInt64));
    if (!st.ok()) {
      std::cerr << "drafter training step: " << st.to_string() << "\n";
      std::exit(1);
    }
    drafter::DrafterTrainer trainer(drafter, target, 1e-3, 3, bf16);
    trainer.step(tokens, hidden, mask);
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      double t0 = now();
      trainer.step(tokens, hidden, mask);
      best = std::min(best, now() - t0);
    }
    return best;
  };
  double f32 = seconds(false), bf16 = seconds(true);
  std::printf(
      "\ndrafter training step (%lld windows of %lld, 3 levels, %lld-token draft vocabulary): "
      "float32 %.3f s, bfloat16 products %.3f s = %.2fx\n",
      (long long)windows, (long long)len, (long long)vocab, f32, bf16, f32 / bf16);
}

// What sharing a GRPO group's prompt buys the policy update (rl::GrpoOptions::share_prompts): one
// whole update (rl::PolicyTrainer::update: reference and old log-probabilities, two minibatch
// steps) over one group of 8 answers to one prompt, each sample running its whole sequence
// against the prompt run once per pass, side by side, the fastest of 2 each. The shape is
// bench/rl_e2e_model.yaml's first step on SmolLM2: a 96-token chat prompt (arithmetic-cot's
// through SmolLM2's template: 90-100 tokens), answers long-tailed around a median of ~60 tokens
// (lengths below), products in bfloat16 where the CPU has them (spec.model.dtype auto).
void print_update_sharing(const model::Transformer& target) {
  const int64_t prompt = std::min<int64_t>(96, target->config().max_seq / 4);
  std::vector<int64_t> lengths{222, 120, 80, 65, 58, 50, 40, 30};
  torch::manual_seed(5);
  torch::Tensor p = torch::randint(target->config().vocab, {prompt}, torch::kInt64);  // (P,)
  std::vector<int64_t> ids(p.data_ptr<int64_t>(), p.data_ptr<int64_t>() + prompt);
  std::vector<std::vector<int64_t>> prompts, responses;
  int64_t positions = 0;
  for (int64_t n : lengths) {
    n = std::min<int64_t>(n, target->config().max_seq - prompt);
    torch::Tensor r = torch::randint(target->config().vocab, {n}, torch::kInt64);  // (n,)
    prompts.push_back(ids);
    responses.emplace_back(r.data_ptr<int64_t>(), r.data_ptr<int64_t>() + n);
    positions += prompt + n;
  }
  rl::SequenceBatch batch = rl::make_batch(prompts, responses);
  torch::Tensor advantages = torch::randn({int64_t(lengths.size())});  // (B,)
  auto seconds = [&](bool share, int64_t* run) {
    rl::GrpoOptions o;
    o.kl_coef = 0.01, o.temperature = 0.7, o.share_prompts = share;
    o.bfloat16 = model::native_bfloat16(torch::kCPU);
    double best = 1e30;
    for (int rep = 0; rep < 2; ++rep) {
      rl::PolicyTrainer trainer(target, target, o);  // the update moves target's weights a little
      double t0 = now();
      rl::UpdateStats st = trainer.update(batch, advantages);
      best = std::min(best, now() - t0);
      *run = st.positions;
    }
    return best;
  };
  int64_t whole_positions = 0, shared_positions = 0;
  double whole = seconds(false, &whole_positions), shared = seconds(true, &shared_positions);
  std::printf(
      "\npolicy update of one GRPO group (8 answers of %lld-%lld tokens to one %lld-token prompt, "
      "%lld tokens): whole sequences %.2f s (%lld positions per pass), prompt shared %.2f s (%lld) "
      "= %.2fx\n",
      (long long)lengths.back(), (long long)lengths.front(), (long long)prompt,
      (long long)positions, whole, (long long)whole_positions, shared, (long long)shared_positions,
      whole / shared);
}

// The task a --model run decodes: an RLJob's default (arithmetic-cot, task seed 1).
constexpr const char* kModelTask = "arithmetic-cot";
constexpr uint64_t kModelTaskSeed = 1;

// The drafter of a --model run: warm-started on the model's own sampled answers to the task's
// training problems (rl::load_or_train_drafter_on_generations, cached under cache_root()).
StatusOr<rl::GenerationsWarmStart> model_drafter(const std::string& path, model::Transformer target,
                                                 model::Drafter drafter, const rl::Task& task,
                                                 const rl::Codec& codec, const ModelDrafter& d,
                                                 int max_new) {
  rl::GenerationsWarmStartOptions o;
  o.steps = d.steps, o.max_new_tokens = max_new, o.vocab_subset = d.vocab, o.prompts = d.prompts;
  o.bfloat16 = o.train_bfloat16 = decode_settings().bfloat16;
  o.train_levels = d.levels;
  o.temperature = d.temperature;  // the rollouts' own, as an RLJob's warm start samples
  o.max_seq = decode_settings().max_seq, o.codec = &codec;
  o.log = [](const std::string& s) { std::printf("  %s\n", s.c_str()), std::fflush(stdout); };
  o.curve_every = std::max(1, d.steps / 4);  // the acceptance curve, printed as it trains
  double t0 = now();
  std::printf(
      "drafter (features=%s, %d layer%s): warm start on the model's generations (%lld prompts, %d "
      "steps, %d training levels, sampled at temperature %g)\n",
      model::drafter_features_name(drafter->features_mode()), d.layers, d.layers == 1 ? "" : "s",
      (long long)o.prompts, d.steps, d.levels, d.temperature);
  std::fflush(stdout);
  return rl::load_or_train_drafter_on_generations(
      target, drafter, task, o, model::model_identity(path),
      std::string(kModelTask) + "-" + std::to_string(kModelTaskSeed), data::cache_root(),
      [&](int64_t s, double loss) {
        if (s % std::max(1, d.steps / 5) == 0) {
          std::printf("  drafter step %lld loss %.3f (%.0f s)\n", (long long)s, loss, now() - t0);
          std::fflush(stdout);
        }
      });
}

// Greedy agreement of the drafter with the target, level by level, on the target's greedy answers
// to held-out problems the table does not decode (rl::held_out_agreement). The exit code.
int print_agreement(model::Transformer target, model::Drafter drafter, const rl::Task& task,
                    const rl::Codec& codec, int max_new) {
  constexpr int64_t kFirst = 1000, kProblems = 32, kLevels = 6;
  double t0 = now();
  StatusOr<drafter::LevelAgreement> a =
      rl::held_out_agreement(target, drafter, task, &codec, kFirst, kProblems, max_new,
                             decode_settings().max_seq, kLevels, decode_settings().bfloat16);
  if (!a.ok()) {
    std::cerr << a.status().to_string() << "\n";
    return 1;
  }
  std::printf(
      "drafter: greedy chains on %lld held-out answers (%lld bases, %.0f s): share whose "
      "first d drafts all match the target\n  d:",
      (long long)kProblems, (long long)(a->bases.empty() ? 0 : a->bases[0]), now() - t0);
  for (size_t d = 0; d < a->bases.size(); ++d) std::printf(" %zu=%.3f", d + 1, a->share(d));
  double sum = 0;
  for (size_t d = 0; d < a->bases.size(); ++d) sum += a->share(d);
  std::printf("\n  accepted drafts per verification of a greedy chain of %lld: %.2f\n",
              (long long)a->bases.size(), sum);
  std::fflush(stdout);
  return 0;
}

}  // namespace

// --model PATH --ceiling-only: load, report memory, print the table. The process's exit code.
int model_ceiling(const std::string& path, const std::vector<int>& batches, int threads,
                  int64_t ceiling_context) {
  runtime::configure_threads(threads);
  StatusOr<model::PretrainedModel> m = load_model(path, threads);
  if (!m.ok()) {
    std::cerr << m.status().to_string() << "\n";
    return 1;
  }
  print_model_ceiling(m->model, batches, ceiling_context);
  print_update_precision(m->model);
  print_drafter_precision(m->model);
  print_update_sharing(m->model);
  std::printf("peak_rss_mb=%lld\n", (long long)(rollout::peak_rss_bytes() >> 20));
  return 0;
}

// --model PATH: the ceilings, the drafter (cached), then the side-by-side table on the task's
// held-out prompts through the model's chat template. The process's exit code.
int model_compare(const std::string& path, const Table& t, const ModelDrafter& d,
                  const std::vector<double>& temperatures, bool prepare_only,
                  int64_t ceiling_context) {
  runtime::configure_threads(prepare_only ? 0 : t.threads);
  StatusOr<model::PretrainedModel> m = load_model(path, t.threads);
  if (!m.ok()) {
    std::cerr << m.status().to_string() << "\n";
    return 1;
  }
  model::Transformer target = m->model;
  // Prompt + response + drafts; a model of shorter context (the tiny test checkpoints) gets its
  // own.
  decode_settings().max_seq =
      std::min<int64_t>(decode_settings().max_seq, target->config().max_seq);
  if (!prepare_only) print_model_ceiling(target, t.batches, ceiling_context);
  StatusOr<model::ModelSource> source = model::resolve_model_source(path, "auto");
  StatusOr<std::unique_ptr<rl::ModelCodec>> codec =
      source.ok() ? rl::ModelCodec::load(*source, target->config().vocab)
                  : StatusOr<std::unique_ptr<rl::ModelCodec>>(source.status());
  StatusOr<std::unique_ptr<rl::Task>> task = rl::make_task(kModelTask, kModelTaskSeed);
  if (!codec.ok() || !task.ok()) {
    std::cerr << "--model: " << (codec.ok() ? task.status() : codec.status()).to_string() << "\n";
    return 1;
  }
  // Every drafter before any warm start: a fused one turns on the target's feature export, and
  // all then generate with it on. The export leaves the target's tokens as they were, so each
  // warm start (same options, same seeds) trains on the same generations.
  std::vector<NamedDrafter> drafters;
  for (const std::string& f : d.features) {
    torch::manual_seed(1);
    drafters.push_back({f, model::Drafter(target, d.layers, *model::parse_drafter_features(f))});
  }
  for (NamedDrafter& nd : drafters) {
    StatusOr<rl::GenerationsWarmStart> w =
        model_drafter(path, target, nd.drafter, **task, **codec, d, t.max_new);
    if (!w.ok()) {
      std::cerr << w.status().to_string() << "\n";
      return 1;
    }
    std::printf(
        "drafter (features=%s): %s %s (%lld generated tokens, loss %.3f -> %.3f, draft "
        "vocabulary %lld)\n",
        nd.name.c_str(), w->trained ? "trained and cached" : "loaded", w->cache_path.c_str(),
        (long long)w->generated_tokens, w->loss_first, w->loss_last,
        (long long)nd.drafter->draft_vocab_size());
    if (prepare_only && print_agreement(target, nd.drafter, **task, **codec, t.max_new) != 0)
      return 1;
  }
  if (prepare_only) return 0;
  rl::TaskRequestOptions ro;
  ro.max_new_tokens = t.max_new, ro.max_seq = decode_settings().max_seq;
  RequestMaker make_requests = [&](int n, int offset) {
    int g = std::max(1, t.group);  // held-out problems offset.., each asked g times
    StatusOr<std::vector<rollout::Request>> base =
        rl::task_requests(**task, **codec, uint64_t(offset), (n + g - 1) / g, true, ro);
    if (!base.ok()) {
      std::cerr << base.status().to_string() << "\n";
      std::exit(1);
    }
    std::vector<rollout::Request> out;
    for (int i = 0; i < n; ++i) {
      out.push_back((*base)[size_t(i / g)]);
      out.back().id = i, out.back().seed = uint64_t(i);
    }
    return out;
  };
  std::vector<SummaryRow> summary;
  int lost = 0;
  for (double temperature : temperatures) {
    Table tt = t;
    tt.temperature = ro.temperature = temperature;
    lost += compare(target, drafters, tt, make_requests, &summary);
  }
  if (temperatures.size() > 1 || drafters.size() > 1) print_summary(summary, temperatures);
  if (lost > 0) std::printf("%d runs differ from plain decoding: not lossless\n", lost);
  return lost == 0 ? 0 : 1;
}

}  // namespace tlt::bench
