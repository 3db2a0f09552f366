#include "bench/rollout_preset.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include <torch/torch.h>

#include "bench/clock.h"
#include "bench/rollout_ceiling.h"
#include "runtime/data/token_file.h"
#include "runtime/drafter/trainer.h"
#include "runtime/model/checkpoint.h"
#include "runtime/rollout/engine.h"
#include "runtime/torch_env.h"
#include "runtime/tst/trainer.h"

namespace tlt::bench {

namespace {

namespace fs = std::filesystem;

// The corpus's documents, split as a TSTPretrainJob splits them (5% held out by name).
struct Split {
  std::vector<std::vector<int32_t>> train, held;
};

model::Transformer trained_target(const std::string& preset, const data::TokenizedCorpus& corpus,
                                  const Split& split, int steps, const std::string& cache) {
  model::ModelConfig cfg = *model::preset_config(preset, corpus.vocab);
  torch::manual_seed(0);
  model::Transformer target(cfg);
  if (fs::exists(cache) && model::load_checkpoint(*target, cache).ok()) {
    std::printf("target: loaded %s\n", cache.c_str());
    return target;
  }
  tst::TrainerOptions o;
  o.schedule.steps = steps, o.schedule.warmup = steps / 20, o.schedule.decay_fraction = 0.2;
  o.schedule.peak_lr = 2e-3, o.schedule.superposition = false;
  o.batch = 16, o.positions = 256, o.eval_batches = 2;
  tst::TSTTrainer trainer(target, tst::PackedStream(split.train, 1),
                          tst::PackedStream(split.held, 2), o);
  double t0 = now();
  std::printf("target: training %s (%lld parameters) for %d steps...\n", preset.c_str(),
              (long long)cfg.parameter_count(), steps);
  while (!trainer.finished()) {
    tst::StepResult r = trainer.step();
    if ((r.step + 1) % std::max(1, steps / 10) == 0) {
      std::printf("  step %lld loss %.3f (%.0f s)\n", (long long)r.step + 1, r.loss, now() - t0);
      std::fflush(stdout);
    }
  }
  std::printf("target: held-out loss %.3f\n", trainer.evaluate());
  fs::create_directories(fs::path(cache).parent_path());
  if (!model::save_checkpoint(*target, cache, preset).ok()) std::printf("target: not cached\n");
  return target;
}

// n requests in groups of `group` that share a prompt (a GRPO group), each with its own seed.
std::vector<rollout::Request> prompts(const std::vector<std::vector<int32_t>>& held, int n,
                                      int max_new, double temperature, int offset, int group = 1) {
  std::vector<rollout::Request> out;
  for (int i = 0; i < n; ++i) {
    int g = i / std::max(1, group);
    const auto& d = held[size_t(g + offset) % held.size()];
    size_t start = (size_t(g) * 97) % std::max<size_t>(1, d.size() > 64 ? d.size() - 64 : 1);
    rollout::Request r;
    r.id = i;
    r.prompt.assign(d.begin() + long(start), d.begin() + long(std::min(d.size(), start + 32)));
    r.max_new_tokens = max_new;
    r.sampling.temperature = temperature;
    r.seed = uint64_t(i);
    out.push_back(r);
  }
  return out;
}

void train_drafter(model::Transformer target, model::Drafter drafter,
                   const std::vector<std::vector<int32_t>>& held, int steps) {
  // The target's own generations (temperature 1, as RL rollouts sample) are the training data.
  rollout::EngineOptions eo;
  eo.max_batch = 32, eo.max_seq = 512, eo.speculative = false;
  auto engine = std::move(rollout::Engine::create(target, model::Drafter(nullptr), eo).value());
  std::vector<rollout::Request> reqs = prompts(held, 64, 160, 1.0, 1000);
  std::vector<rollout::Completion> gens = *engine->generate(reqs);
  drafter::DrafterTrainer trainer(drafter, target, 1e-3);
  double t0 = now();
  for (int s = 0; s < steps; ++s) {
    std::vector<torch::Tensor> toks;
    for (int b = 0; b < 8; ++b) {
      size_t i = size_t(s * 8 + b) % reqs.size();
      std::vector<int64_t> seq = reqs[i].prompt;
      seq.insert(seq.end(), gens[i].tokens.begin(), gens[i].tokens.end());
      seq.resize(std::min<size_t>(seq.size(), 192));
      while (seq.size() < 192) seq.push_back(seq.back());
      toks.push_back(torch::tensor(seq, torch::kInt64));
    }
    torch::Tensor batch = torch::stack(toks);  // (8, 192)
    torch::Tensor hidden;
    {
      torch::NoGradGuard g;
      hidden =
          target->forward(batch, model::sequential_positions(torch::zeros({8}, torch::kInt64), 192))
              .hidden;
    }
    double loss = trainer.step(batch, hidden, torch::ones({8, 192}));
    if ((s + 1) % std::max(1, steps / 5) == 0) {
      std::printf("  drafter step %d loss %.3f (%.0f s)\n", s + 1, loss, now() - t0);
      std::fflush(stdout);
    }
  }
  drafter->eval();
}

// The target's drafter, loaded from `cache` or trained and saved there; with o.drafter.vocab K > 0
// it drafts over the K most frequent tokens of the training text. Errors of the vocabulary.
StatusOr<model::Drafter> preset_drafter(const RolloutOptions& o, model::Transformer target,
                                        const Split& split, int32_t vocab,
                                        const std::string& cache) {
  torch::manual_seed(1);
  model::Drafter drafter(target, 1);
  if (fs::exists(cache) && model::load_checkpoint(*drafter, cache).ok()) {
    std::printf("drafter: loaded %s\n", cache.c_str());
  } else {
    std::printf("drafter: training %d steps on the target's generations\n", o.drafter.steps);
    train_drafter(target, drafter, split.held, o.drafter.steps);
    if (!model::save_checkpoint(*drafter, cache, "drafter").ok())
      std::printf("drafter: not cached\n");
  }
  drafter->eval();
  if (o.prepare_only || o.drafter.vocab <= 0) return drafter;
  std::vector<int64_t> counts(size_t(vocab), 0);
  for (const auto& d : split.train)
    for (int32_t t : d) ++counts[size_t(t)];
  TLT_RETURN_IF_ERROR(
      drafter->set_draft_vocab(model::most_frequent_tokens(counts, o.drafter.vocab)));
  return drafter;
}

}  // namespace

int preset_compare(const RolloutOptions& o) {
  auto corpus = data::read_token_file(o.tokens);
  if (!corpus.ok()) {
    std::cerr << corpus.status().to_string() << "\n";
    return 1;
  }
  Split split;
  for (auto& d : corpus->docs)
    (data::held_out_by_name(d.name, 0.05) ? split.held : split.train).push_back(d.ids);
  // BLIS reads its thread count once, so training (all cores) and measuring (one core per
  // worker) run in separate processes: bench/rollout.sh calls --prepare-only first.
  runtime::configure_threads(o.prepare_only ? 0 : o.table.threads);
  std::string cache = data::cache_root() + "/bench/target-" + o.preset + "-" +
                      std::to_string(corpus->vocab) + "-" + std::to_string(o.train_steps) + ".ckpt";
  model::Transformer target = trained_target(o.preset, *corpus, split, o.train_steps, cache);
  target->eval();
  StatusOr<model::Drafter> drafter = preset_drafter(
      o, target, split, corpus->vocab, cache + ".drafter-" + std::to_string(o.drafter.steps));
  if (!drafter.ok()) {
    std::cerr << drafter.status().to_string() << "\n";
    return 1;
  }
  if (o.prepare_only) return 0;
  const Table& t = o.table;
  // Mid-response: the 32-token prompt plus half the response.
  print_ceiling(target, t.batches, 32 + t.max_new / 2, t.decode.bfloat16);
  if (o.ceiling_only) return 0;
  std::vector<SummaryRow> summary;
  StatusOr<int> lost = compare(
      target, {{"last", *drafter}}, t,
      [&](int n, int offset) -> StatusOr<std::vector<rollout::Request>> {
        return prompts(split.held, n, t.max_new, t.temperature, offset, t.group);
      },
      &summary);
  if (!lost.ok()) {
    std::cerr << lost.status().to_string() << "\n";
    return 1;
  }
  if (*lost > 0) std::printf("%d runs differ from plain decoding: not lossless\n", *lost);
  return *lost == 0 ? 0 : 1;
}

}  // namespace tlt::bench
