#include "bench/rollout_preset.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include <torch/torch.h>

#include "bench/rollout_ceiling.h"
#include "bench/rollout_drafter.h"
#include "runtime/clock.h"
#include "runtime/data/token_file.h"
#include "runtime/model/checkpoint.h"
#include "runtime/model/model_source.h"
#include "runtime/rollout/engine.h"
#include "runtime/torch_env.h"
#include "runtime/tst/trainer.h"

namespace tlt::bench {

namespace {

namespace fs = std::filesystem;

// The corpus's documents, split as a TSTPretrainJob splits them (5% held out by name): the
// target and its drafter learn from `train`, the tables decode `held`.
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
  double t0 = runtime::now_s();
  std::printf("target: training %s (%lld parameters) for %d steps...\n", preset.c_str(),
              (long long)cfg.parameter_count(), steps);
  while (!trainer.finished()) {
    tst::StepResult r = trainer.step();
    if ((r.step + 1) % std::max(1, steps / 10) == 0) {
      std::printf("  step %lld loss %.3f (%.0f s)\n", (long long)r.step + 1, r.loss,
                  runtime::now_s() - t0);
      std::fflush(stdout);
    }
  }
  std::printf("target: held-out loss %.3f\n", trainer.evaluate());
  fs::create_directories(fs::path(cache).parent_path());
  if (!model::save_checkpoint(*target, cache, preset).ok()) std::printf("target: not cached\n");
  return target;
}

// The 32-token window of prompt g: document g + offset (mod their count), from a position that
// moves with g.
std::vector<int64_t> window(const std::vector<std::vector<int32_t>>& docs, uint64_t g,
                            uint64_t offset) {
  const auto& d = docs[size_t((g + offset) % docs.size())];
  size_t start = size_t(g * 97) % std::max<size_t>(1, d.size() > 64 ? d.size() - 64 : 1);
  return std::vector<int64_t>(d.begin() + long(start),
                              d.begin() + long(std::min(d.size(), start + 32)));
}

// n requests in groups of `group` that share a prompt (a GRPO group), each with its own seed.
std::vector<rollout::Request> prompts(const std::vector<std::vector<int32_t>>& held, int n,
                                      int max_new, double temperature, int offset, int group = 1) {
  std::vector<rollout::Request> out;
  for (int i = 0; i < n; ++i) {
    rollout::Request r;
    r.id = i;
    r.prompt = window(held, uint64_t(i / std::max(1, group)), uint64_t(offset));
    r.max_new_tokens = max_new;
    r.sampling.temperature = temperature;
    r.seed = uint64_t(i);
    out.push_back(r);
  }
  return out;
}

// The corpus as an rl::Task, so that the jobs' drafter warm start can draw its prompts from it:
// problem i of a stream is the 32-token window prompts() would cut for request i from the
// training (or the held-out) documents. Its ids come from the corpus (encode), never from text:
// the tokenizer that wrote the corpus does not share a process with LibTorch (token_file.h).
// Nothing to answer: every reward is 0.
class CorpusTask : public rl::Task {
 public:
  explicit CorpusTask(const Split& split) : split_(split) {}
  rl::Problem problem(uint64_t i, bool held_out) const override {
    rl::Problem p;
    p.id = std::string(held_out ? "held " : "train ") + std::to_string(i);
    return p;
  }
  double reward(const rl::Problem&, const std::string&) const override { return 0.0; }
  std::string chat_prompt(const rl::Problem&) const override { return ""; }
  StatusOr<std::vector<int64_t>> encode(const rl::Codec&, const rl::Problem& p) const override {
    bool held = p.id.rfind("held ", 0) == 0;
    uint64_t i = std::stoull(p.id.substr(p.id.find(' ') + 1));
    const auto& docs = held ? split_.held : split_.train;
    if (docs.empty()) return Status::FailedPrecondition("the corpus has no such documents");
    return window(docs, i, 0);
  }

 private:
  const Split& split_;
};

// The corpus's ids behind rl::Codec: its vocabulary and end-of-document id. Text cannot be
// encoded here (no tokenizer in this process); CorpusTask supplies the ids.
class CorpusCodec : public rl::Codec {
 public:
  CorpusCodec(int64_t vocab, int64_t eos) : vocab_(vocab), end_{eos} {}
  StatusOr<std::vector<int64_t>> encode(const std::string&) const override { return refuse(); }
  StatusOr<std::vector<int64_t>> encode_prompt(const std::string&,
                                               const std::string&) const override {
    return refuse();
  }
  StatusOr<std::string> decode(const std::vector<int64_t>& ids) const override {
    std::string s;  // the ids as numbers: the corpus's text is not in this process
    for (int64_t id : ids) s += (s.empty() ? "" : " ") + std::to_string(id);
    return s;
  }
  int64_t vocab_size() const override { return vocab_; }
  const std::vector<int64_t>& end_ids() const override { return end_; }
  bool has_chat() const override { return false; }

 private:
  static Status refuse() {
    return Status::InvalidArgument("the preset bench's prompts are corpus ids (CorpusTask)");
  }
  int64_t vocab_;
  std::vector<int64_t> end_;
};

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
  target->to(torch::Device(o.device));  // trained on the CPU; its drafters and engines follow
  target->eval();
  const Table& t = o.table;
  // Mid-response: the 32-token prompt plus half the response.
  if (o.ceiling_only && !o.prepare_only) {
    print_ceiling(target, t.batches, 32 + t.max_new / 2, t.decode.bfloat16);
    return 0;
  }
  // The drafter as an RLJob on this checkpoint (spec.model.path) warm-starts it: on the target's
  // own answers to the corpus's training windows, cached per target, corpus and options.
  CorpusTask task(split);
  CorpusCodec codec(corpus->vocab, corpus->eos_id);
  DrafterSource source{&task, &codec, model::model_identity(cache),
                       "corpus " + model::model_identity(o.tokens), "the target's"};
  StatusOr<std::vector<NamedDrafter>> drafters = warm_start_drafters(o, target, source, t);
  if (!drafters.ok()) {
    std::cerr << drafters.status().to_string() << "\n";
    return 1;
  }
  if (o.prepare_only) return 0;
  print_precision(target, t);
  print_ceiling(target, t.batches, 32 + t.max_new / 2, t.decode.bfloat16);
  std::vector<SummaryRow> summary;
  StatusOr<int> lost = compare(
      target, *drafters, t,
      [&](int n, int offset) -> StatusOr<std::vector<rollout::Request>> {
        return prompts(split.held, n, t.max_new, t.temperature, offset, t.group);
      },
      &summary);
  if (!lost.ok()) {
    std::cerr << lost.status().to_string() << "\n";
    return 1;
  }
  if (drafters->size() > 1) print_summary(summary, o.temperatures);
  if (*lost > 0) std::printf("%d runs differ from plain decoding: not lossless\n", *lost);
  return *lost == 0 ? 0 : 1;
}

}  // namespace tlt::bench
