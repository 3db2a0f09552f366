#include "runtime/rl/drafter_on_generations.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <sstream>

#include "api/fnv.h"
#include "runtime/drafter/buffer.h"
#include "runtime/drafter/trainer.h"
#include "runtime/model/checkpoint.h"
#include "runtime/rl/evaluation.h"
#include "runtime/rl/seeds.h"

namespace tlt::rl {
namespace {

namespace fs = std::filesystem;

// Positions past prompt + response a generating request leaves free: the engine without draft
// arms needs 2.
constexpr int64_t kHeadroom = 8;

double mean(const std::vector<double>& v, size_t from, size_t to) {
  double s = 0;
  for (size_t i = from; i < to; ++i) s += v[i];
  return to > from ? s / double(to - from) : 0.0;
}

// "42s", "3m05s" or "1h02m".
std::string duration(double seconds) {
  int64_t s = int64_t(seconds + 0.5);
  char buf[32];
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%llds", (long long)s);
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%lldm%02llds", (long long)(s / 60), (long long)(s % 60));
  else
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", (long long)(s / 3600), (long long)(s / 60 % 60));
  return buf;
}

// One phase's progress lines on options.log: "drafter warm start: <phase> done/total, <detail>,
// eta <time left>", at most one per log_seconds, and always the line of done == total; `detail`
// is called only for a line it writes. The time left assumes the rest goes at the pace so far.
class PhaseProgress {
 public:
  PhaseProgress(const GenerationsWarmStartOptions& o, std::string phase, int64_t total)
      : log_(o.log), every_(o.log_seconds), phase_(std::move(phase)), total_(total) {}
  void update(int64_t done, const std::function<std::string()>& detail) {
    double now = seconds();
    if (!log_ || (done < total_ && now - last_ < every_)) return;
    last_ = now;
    std::string eta = done > 0 ? duration(now / double(done) * double(total_ - done)) : "?";
    log_("drafter warm start: " + phase_ + " " + std::to_string(done) + "/" +
         std::to_string(total_) + ", " + detail() + ", " +
         (done < total_ ? "eta " + eta : "done in " + duration(now)));
  }
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::function<void(const std::string&)> log_;
  double every_;
  std::string phase_;
  int64_t total_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  double last_ = 0;
};

// Step 1: the target's plain answers to `requests` (sampled as each asks), every committed
// position recorded in `buffer`, progress as `phase` on o.log; returns the generated tokens per
// id (the vocabulary's counts), or the engine's error.
StatusOr<std::vector<int64_t>> generate_into(model::Transformer target,
                                             const std::vector<rollout::Request>& requests,
                                             const GenerationsWarmStartOptions& o,
                                             drafter::HiddenBuffer* buffer,
                                             const std::string& phase) {
  rollout::EngineOptions eo;
  eo.max_batch = o.generation_batch, eo.max_seq = o.max_seq, eo.speculative = false;
  eo.arms = {};
  eo.bfloat16 = o.bfloat16;
  StatusOr<std::unique_ptr<rollout::Engine>> engine =
      rollout::Engine::create(target, model::Drafter(nullptr), eo);
  if (!engine.ok()) return engine.status();
  // Per request in flight: prompt positions its sink calls have yet to pass, response tokens
  // counted so far (the sink lags the last token; a completion settles the count).
  std::map<int64_t, int64_t> unseen, counted;
  for (const rollout::Request& r : requests) {
    buffer->add_request(r.id, int64_t(r.prompt.size()));
    unseen[r.id] = int64_t(r.prompt.size());
  }
  PhaseProgress progress(o, phase, int64_t(requests.size()));
  int64_t done = 0, generated = 0;
  auto report = [&] {
    progress.update(done, [&] {
      double rate = double(generated) / std::max(1e-9, progress.seconds());
      return std::to_string(generated) + " tokens, " + std::to_string(int64_t(rate + 0.5)) +
             " tokens/s";
    });
  };
  rollout::HiddenSink record = buffer->sink();
  (*engine)->set_hidden_sink(
      [&](int64_t id, const std::vector<int64_t>& toks, const torch::Tensor& hidden) {
        record(id, toks, hidden);
        int64_t n = int64_t(toks.size());
        if (auto it = unseen.find(id); it != unseen.end()) {
          int64_t prompt = std::min(it->second, n);
          n -= prompt;
          if ((it->second -= prompt) == 0) unseen.erase(it);
        }
        counted[id] += n, generated += n;
        report();
      });
  (*engine)->set_completion_sink([&](const rollout::Completion& c) {
    generated += int64_t(c.tokens.size()) - counted[c.id];
    counted.erase(c.id), ++done;
    report();
  });
  StatusOr<std::vector<rollout::Completion>> out = (*engine)->generate(requests);
  if (!out.ok()) return out.status();
  std::vector<int64_t> counts(size_t(target->config().vocab), 0);
  for (const rollout::Completion& c : *out)
    for (int64_t t : c.tokens)
      if (t >= 0 && t < int64_t(counts.size())) ++counts[size_t(t)];
  return counts;
}

// The draft vocabulary's size for `o` on a target of `vocab` ids: K, or 0 for all.
int64_t subset_size(const GenerationsWarmStartOptions& o, int64_t vocab) {
  return o.vocab_subset > 0 && o.vocab_subset < vocab ? o.vocab_subset : 0;
}

// What the cache file holds: the drafter's parameters and its draft vocabulary (K).
struct CachedDrafter : torch::nn::Module {
  CachedDrafter(model::Drafter d, int64_t k) {
    register_module("drafter", std::move(d));
    vocab = register_buffer("draft_vocab", torch::zeros({k}, torch::kInt64));  // (K)
  }
  torch::Tensor vocab;
};

// The number after "name=" on its own line of `meta`, or -1.
double meta_value(const std::string& meta, const std::string& name) {
  size_t at = meta.find("\n" + name + "=");
  return at == std::string::npos ? -1.0 : std::atof(meta.c_str() + at + name.size() + 2);
}

}  // namespace

Status GenerationsWarmStartOptions::validate() const {
  auto positive = [](int64_t v, const char* field) {
    return v >= 1 ? Status::Ok()
                  : Status::InvalidArgument(std::string(field) + ": must be >= 1 (got " +
                                            std::to_string(v) + ")");
  };
  TLT_RETURN_IF_ERROR(positive(steps, "steps"));
  TLT_RETURN_IF_ERROR(positive(batch, "batch"));
  TLT_RETURN_IF_ERROR(positive(prompts, "prompts"));
  TLT_RETURN_IF_ERROR(positive(max_new_tokens, "max_new_tokens"));
  TLT_RETURN_IF_ERROR(positive(generation_batch, "generation_batch"));
  if (train_levels < 1 || train_levels > drafter::kMaxLevels)
    return Status::InvalidArgument("train_levels: must be in [1, " +
                                   std::to_string(drafter::kMaxLevels) + "] (got " +
                                   std::to_string(train_levels) + ")");
  if (curve_every < 0) return Status::InvalidArgument("curve_every: must be >= 0 (0: no curve)");
  if (curve_every > 0) {
    TLT_RETURN_IF_ERROR(positive(curve_problems, "curve_problems"));
    if (curve_levels < 1 || curve_levels > drafter::kMaxLevels)
      return Status::InvalidArgument("curve_levels: must be in [1, " +
                                     std::to_string(drafter::kMaxLevels) + "]");
  }
  if (temperature < 0 || top_p <= 0 || top_p > 1)
    return Status::InvalidArgument("temperature must be >= 0 and top_p in (0, 1]");
  if (max_seq < max_new_tokens + kHeadroom + 1)
    return Status::InvalidArgument("max_seq " + std::to_string(max_seq) +
                                   ": must leave room for a prompt, max_new_tokens (" +
                                   std::to_string(max_new_tokens) + ") and " +
                                   std::to_string(kHeadroom) + " positions of headroom");
  return Status::Ok();
}

// The training recipe's version: a change to what the same options train (2: the drafter's
// cross-entropy over its draft vocabulary, drafter::drafter_loss) must not load older drafters.
constexpr int kRecipe = 2;

std::string GenerationsWarmStartOptions::key() const {
  std::ostringstream k;
  k << "recipe=" << kRecipe << " steps=" << steps << " batch=" << batch << " lr=" << learning_rate
    << " seed=" << seed << " prompts=" << prompts << " max_new=" << max_new_tokens
    << " temperature=" << temperature << " top_p=" << top_p
    << " generation_batch=" << generation_batch << " vocab_subset=" << vocab_subset
    << " max_seq=" << max_seq;
  if (train_levels != 1) k << " train_levels=" << train_levels;  // older keys stay valid
  if (bfloat16) k << " bfloat16=1";
  if (train_bfloat16) k << " train_bfloat16=1";
  return k.str();
}

StatusOr<std::vector<rollout::Request>> task_requests(const Task& task, const Codec& codec,
                                                      uint64_t first, int64_t n, bool held_out,
                                                      const TaskRequestOptions& o) {
  std::vector<rollout::Request> out;
  for (int64_t i = 0; i < n; ++i) {
    StatusOr<FittedProblem> f = fitting_problem(task, codec, first + uint64_t(i), held_out,
                                                o.max_seq - o.max_new_tokens - o.headroom);
    if (!f.ok()) return f.status();
    rollout::Request r;
    r.id = i;
    r.prompt = std::move(f->prompt);
    r.max_new_tokens = int32_t(o.max_new_tokens);
    set_stop_tokens(codec, &r);
    r.sampling.temperature = o.temperature;
    r.sampling.top_p = o.top_p;
    r.seed = mix_seeds(o.seed, uint64_t(i));
    out.push_back(std::move(r));
  }
  return out;
}

namespace {

// The target's greedy answers to held-out problems first..first+n-1, plainly decoded, packed as
// drafter::HiddenBuffer::tensors() (tokens, hidden, offsets, prompts); errors of the requests and
// the engine.
StatusOr<std::vector<torch::Tensor>> held_out_answers(
    model::Transformer target, const Task& task, const Codec* codec, uint64_t first, int64_t n,
    int64_t max_new_tokens, int64_t max_seq, bool bfloat16,
    const std::function<void(const std::string&)>& log) {
  GenerationsWarmStartOptions o;
  o.max_new_tokens = max_new_tokens, o.temperature = 0.0, o.max_seq = max_seq;
  o.bfloat16 = bfloat16;
  o.generation_batch = std::min<int64_t>(16, std::max<int64_t>(1, n));
  o.log = log;
  TaskRequestOptions ro{max_new_tokens, 0.0, 1.0, 0, max_seq, kHeadroom};
  StatusOr<std::vector<rollout::Request>> requests =
      task_requests(task, codec ? *codec : ascii_codec(), first, n, true, ro);
  if (!requests.ok()) return requests.status();
  target->eval();
  drafter::HiddenBuffer buffer;
  StatusOr<std::vector<int64_t>> counts =
      generate_into(target, *requests, o, &buffer, "generating held-out answers");
  if (!counts.ok()) return counts.status().with_context("generating held-out answers");
  return buffer.tensors();
}

// drafter::greedy_agreement over every answer of `d` (held_out_answers) whole, from each
// prompt's last position on. Reads the drafter only.
drafter::LevelAgreement agreement_on(model::Drafter drafter, const std::vector<torch::Tensor>& d,
                                     int64_t levels) {
  drafter::LevelAgreement total;
  for (int64_t r = 0; r < d[3].size(0); ++r) {
    int64_t row = d[2][r].item<int64_t>(), len = d[2][r + 1].item<int64_t>() - row;
    int64_t prompt = d[3][r].item<int64_t>();
    if (len < 2) continue;
    torch::Tensor tokens = d[0].narrow(0, row, len).unsqueeze(0);                    // (1, len)
    torch::Tensor hidden = d[1].narrow(0, row, len).unsqueeze(0);                    // (1, len, C)
    torch::Tensor mask = torch::arange(len, torch::kInt64).ge(prompt).unsqueeze(0);  // (1, len)
    total.add(drafter::greedy_agreement(drafter, tokens, hidden, mask, levels));
  }
  return total;
}

// Step 3 (and step 4's points when `held_out` is set): trains `drafter` on `buffer`'s windows,
// filling the result's losses, training time and curve.
void train(model::Transformer target, model::Drafter drafter, const GenerationsWarmStartOptions& o,
           const drafter::HiddenBuffer& buffer, const std::vector<torch::Tensor>* held_out,
           const std::function<void(int64_t, double)>& progress, GenerationsWarmStart* result) {
  std::vector<std::vector<torch::Tensor>> data{buffer.tensors()};
  drafter::DrafterTrainer trainer(drafter, target, o.learning_rate, o.train_levels,
                                  o.train_bfloat16);
  std::mt19937_64 rng(o.seed);
  std::vector<double> losses;
  PhaseProgress lines(o, "training step", o.steps);
  double evaluating = 0;  // seconds of the curve's points
  auto point = [&](int64_t step) {
    if (!held_out || (step % o.curve_every != 0 && step != o.steps)) return;
    auto t0 = std::chrono::steady_clock::now();
    drafter::CurvePoint p{step, agreement_on(drafter, *held_out, o.curve_levels)};
    evaluating += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    result->curve.push_back(p);
    if (o.log) o.log("drafter warm start: acceptance " + drafter::format_point(p));
  };
  point(0);
  for (int64_t s = 0; s < o.steps; ++s) {
    std::vector<torch::Tensor> b = drafter::sample_windows(data, o.batch, rng);
    losses.push_back(trainer.step(b[0], b[1], b[2]));
    if (progress) progress(s + 1, losses.back());
    lines.update(s + 1, [&] {
      char detail[64];
      std::snprintf(detail, sizeof detail, "loss %.3f, %.2f steps/s", losses.back(),
                    double(s + 1) / std::max(1e-9, lines.seconds() - evaluating));
      return std::string(detail);
    });
    point(s + 1);
  }
  drafter->eval();
  result->training_seconds = lines.seconds() - evaluating;
  size_t n = losses.size(), k = std::min<size_t>(10, n);
  result->loss_first = mean(losses, 0, k);
  result->loss_last = mean(losses, n - k, n);
}

}  // namespace

StatusOr<GenerationsWarmStart> drafter_warm_start_on_generations(
    model::Transformer target, model::Drafter drafter, const Task& task,
    const GenerationsWarmStartOptions& o, const std::function<void(int64_t, double)>& progress) {
  TLT_RETURN_IF_ERROR(o.validate());
  target->eval();
  const Codec& codec = o.codec ? *o.codec : ascii_codec();
  // Before the seed below, so that the curve leaves the training's random draws as they were.
  std::vector<torch::Tensor> held_out;
  if (o.curve_every > 0) {
    StatusOr<std::vector<torch::Tensor>> h =
        held_out_answers(target, task, &codec, o.curve_first, o.curve_problems, o.max_new_tokens,
                         o.max_seq, o.bfloat16, o.log);
    if (!h.ok()) return h.status().with_context("the acceptance curve's held-out answers");
    held_out = std::move(*h);
  }
  torch::manual_seed(o.seed);
  TaskRequestOptions ro{o.max_new_tokens, o.temperature, o.top_p, o.seed, o.max_seq, kHeadroom};
  StatusOr<std::vector<rollout::Request>> requests =
      task_requests(task, codec, 0, o.prompts, false, ro);
  if (!requests.ok()) return requests.status();
  GenerationsWarmStart result;
  result.threads = at::get_num_threads();
  if (o.log) {
    char line[256];
    std::snprintf(line, sizeof line,
                  "drafter warm start: generating %lld answers (temperature %g, top-p %g, seed "
                  "%llu, up to %lld tokens each), %lld at a time on %d thread%s",
                  (long long)o.prompts, o.temperature, o.top_p, (unsigned long long)o.seed,
                  (long long)o.max_new_tokens, (long long)o.generation_batch, result.threads,
                  result.threads == 1 ? "" : "s");
    o.log(line);
  }
  drafter::HiddenBuffer buffer;
  auto t0 = std::chrono::steady_clock::now();
  StatusOr<std::vector<int64_t>> counts =
      generate_into(target, *requests, o, &buffer, "generated answers");
  if (!counts.ok()) return counts.status().with_context("generating the drafter's data");
  result.generation_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (int64_t c : *counts) result.generated_tokens += c;
  result.draft_vocab = model::most_frequent_tokens(*counts, subset_size(o, target->config().vocab));
  TLT_RETURN_IF_ERROR(drafter->set_draft_vocab(result.draft_vocab));
  train(target, drafter, o, buffer, held_out.empty() ? nullptr : &held_out, progress, &result);
  if (o.log && !result.curve.empty()) {
    std::istringstream table(drafter::format_curve(result.curve));
    for (std::string line; std::getline(table, line);) o.log(line);
  }
  result.trained = true;
  return result;
}

StatusOr<drafter::LevelAgreement> held_out_agreement(model::Transformer target,
                                                     model::Drafter drafter, const Task& task,
                                                     const Codec* codec, uint64_t first, int64_t n,
                                                     int64_t max_new_tokens, int64_t max_seq,
                                                     int64_t levels, bool bfloat16) {
  StatusOr<std::vector<torch::Tensor>> d =
      held_out_answers(target, task, codec, first, n, max_new_tokens, max_seq, bfloat16, {});
  if (!d.ok()) return d.status();
  drafter->eval();
  return agreement_on(drafter, *d, levels);
}

StatusOr<GenerationsWarmStart> load_or_train_drafter_on_generations(
    model::Transformer target, model::Drafter drafter, const Task& task,
    const GenerationsWarmStartOptions& o, const std::string& model_key, const std::string& task_key,
    const std::string& cache_dir, const std::function<void(int64_t, double)>& progress) {
  TLT_RETURN_IF_ERROR(o.validate());
  std::string key = "model=" + model_key + " task=" + task_key +
                    " drafter_layers=" + std::to_string(drafter->layers->size()) + " " + o.key();
  if (drafter->fused()) key += " features=fused";  // `last` keys stay as they were
  std::string path =
      cache_dir + "/drafter/generations-" + std::to_string(fnv1a64(key) % 1000000007ull) + ".ckpt";
  CachedDrafter cached(drafter, subset_size(o, target->config().vocab));
  std::error_code ec;
  if (fs::exists(path, ec)) {
    auto refuse = [&](const Status& why) {
      return Status(why.code(), "drafter warm start cache " + path + ": " + why.message() +
                                    "; delete the file to train the drafter again");
    };
    StatusOr<std::string> meta = model::load_checkpoint(cached, path);
    if (!meta.ok()) return refuse(meta.status());
    if (meta->find("\nkey=" + key + "\n") == std::string::npos)
      return refuse(Status::Corruption("it was saved for another model, task or options"));
    GenerationsWarmStart r;
    r.draft_vocab = cached.vocab.numel() > 0 ? cached.vocab.clone() : torch::Tensor();
    TLT_RETURN_IF_ERROR(drafter->set_draft_vocab(r.draft_vocab));
    r.loss_first = meta_value(*meta, "loss_first"), r.loss_last = meta_value(*meta, "loss_last");
    r.generated_tokens = int64_t(meta_value(*meta, "generated_tokens"));
    if (size_t at = meta->find("\ncurve="); at != std::string::npos)
      r.curve = drafter::decode_curve(meta->substr(at + 7, meta->find('\n', at + 7) - at - 7));
    r.cache_path = path;
    drafter->eval();
    if (o.log) {
      o.log("drafter warm start: loaded " + path);
      std::istringstream table(drafter::format_curve(r.curve));
      for (std::string line; std::getline(table, line);) o.log(line);
    }
    return r;
  }
  StatusOr<GenerationsWarmStart> r =
      drafter_warm_start_on_generations(target, drafter, task, o, progress);
  if (!r.ok()) return r.status().with_context("drafter warm start on generations");
  if (r->draft_vocab.defined()) cached.vocab.copy_(r->draft_vocab);
  std::ostringstream meta;
  meta << "drafter warm start on the model's generations\nkey=" << key
       << "\nloss_first=" << r->loss_first << "\nloss_last=" << r->loss_last
       << "\ngenerated_tokens=" << r->generated_tokens << "\n";
  if (!r->curve.empty()) meta << "curve=" << drafter::encode_curve(r->curve) << "\n";
  fs::create_directories(fs::path(path).parent_path(), ec);
  TLT_RETURN_IF_ERROR(model::save_checkpoint(cached, path, meta.str()));
  r->cache_path = path;
  return r;
}

}  // namespace tlt::rl
