#include "bench/rollout_lossless.h"

#include <cstdio>
#include <iostream>

#include <torch/torch.h>

#include "runtime/clock.h"
#include "runtime/model/bfloat16_probe.h"
#include "runtime/model/model_source.h"
#include "runtime/model/pretrained.h"
#include "runtime/rl/drafter_on_generations.h"
#include "runtime/rl/model_codec.h"
#include "runtime/rollout/engine.h"
#include "runtime/torch_env.h"

namespace tlt::bench {

namespace {

// The task whose held-out prompts the check decodes: an RLJob's default (arithmetic-cot, seed 1).
constexpr const char* kTask = "arithmetic-cot";
constexpr uint64_t kTaskSeed = 1;

struct Decoded {
  std::vector<rollout::Completion> out;
  rollout::EngineStats stats;
};

// `requests` decoded greedily by a fresh engine: plainly (`arm` empty) or with `arm` alone.
StatusOr<Decoded> decode(model::Transformer target, model::Drafter drafter, int batch,
                         const std::string& arm, const GreedyCheckOptions& o,
                         const std::vector<rollout::Request>& requests) {
  rollout::EngineOptions eo;
  eo.max_batch = batch, eo.max_seq = o.max_seq, eo.bfloat16 = o.bfloat16;
  eo.speculative = !arm.empty();
  if (!arm.empty()) eo.arms = {arm}, eo.selector = "fixed";
  StatusOr<std::unique_ptr<rollout::Engine>> engine =
      rollout::Engine::create(target, arm.empty() ? model::Drafter(nullptr) : drafter, eo);
  if (!engine.ok()) return engine.status().with_context("arm " + arm);
  StatusOr<std::vector<rollout::Completion>> out = (*engine)->generate(requests);
  if (!out.ok()) return out.status();
  return Decoded{std::move(*out), (*engine)->stats()};
}

// "" when `got` equals `want` token for token, else where they first part.
std::string first_difference(const std::vector<rollout::Completion>& want,
                             const std::vector<rollout::Completion>& got) {
  if (want.size() != got.size()) return "response counts differ";
  for (size_t i = 0; i < want.size(); ++i) {
    const std::vector<int64_t>& a = want[i].tokens;
    const std::vector<int64_t>& b = got[i].tokens;
    size_t j = 0;
    while (j < a.size() && j < b.size() && a[j] == b[j]) ++j;
    if (j == a.size() && j == b.size()) continue;
    return "request " + std::to_string(i) + " token " + std::to_string(j) + ": plain " +
           (j < a.size() ? std::to_string(a[j]) : std::string("(end)")) + ", speculative " +
           (j < b.size() ? std::to_string(b[j]) : std::string("(end)"));
  }
  return "";
}

std::string products(const rollout::EngineStats& s) {
  if (!s.bfloat16) return "float32";
  if (s.bfloat16_rows <= 1) return "bfloat16, unpadded";
  return "bfloat16, padded to " + std::to_string(s.bfloat16_rows) + " rows";
}

int64_t tokens_of(const std::vector<rollout::Completion>& out) {
  int64_t n = 0;
  for (const rollout::Completion& c : out) n += int64_t(c.tokens.size());
  return n;
}

// Plain decoding of batch b against each arm; the number of arms whose responses differ, or the
// error that stopped it.
StatusOr<int> check_batch(model::Transformer target, model::Drafter drafter, const rl::Task& task,
                          const rl::Codec& codec, int b, const GreedyCheckOptions& o) {
  rl::TaskRequestOptions ro;
  ro.max_new_tokens = o.max_new, ro.max_seq = o.max_seq, ro.temperature = 0.0;
  StatusOr<std::vector<rollout::Request>> requests =
      rl::task_requests(task, codec, 0, b, /*held_out=*/true, ro);
  if (!requests.ok()) return requests.status();
  StatusOr<Decoded> plain = decode(target, drafter, b, "", o, *requests);
  if (!plain.ok()) return plain.status();
  int differ = 0;
  for (const std::string& arm : o.arms) {
    double t0 = runtime::now_s();
    StatusOr<Decoded> spec = decode(target, drafter, b, arm, o, *requests);
    if (!spec.ok()) return spec.status();
    double s = runtime::now_s() - t0;
    std::string diff = first_difference(plain->out, spec->out);
    differ += !diff.empty();
    std::printf(
        "greedy b=%d arm=%-6s %s: %lld tokens, %lld speculative steps, %lld drafts accepted, "
        "products in %s (%.1f s)\n",
        b, arm.c_str(), diff.empty() ? "identical" : ("DIFFERENT at " + diff).c_str(),
        (long long)tokens_of(spec->out), (long long)spec->stats.spec_steps,
        (long long)spec->stats.accepted, products(spec->stats).c_str(), s);
    std::fflush(stdout);
  }
  return differ;
}

}  // namespace

int greedy_check(const std::string& path, const GreedyCheckOptions& o) {
  runtime::configure_threads(o.threads);
  StatusOr<model::PretrainedModel> m = model::load_pretrained(path);
  StatusOr<model::ModelSource> source = model::resolve_model_source(path, "auto");
  if (!m.ok() || !source.ok()) {
    std::cerr << "--model: " << (m.ok() ? source.status() : m.status()).to_string() << "\n";
    return 2;
  }
  model::Transformer target = m->model;
  target->to(torch::Device(o.device));  // its caches, drafter and engines follow
  target->eval();
  StatusOr<std::unique_ptr<rl::ModelCodec>> codec =
      rl::ModelCodec::load(*source, target->config().vocab);
  StatusOr<std::unique_ptr<rl::Task>> task = rl::make_task(kTask, kTaskSeed);
  if (!codec.ok() || !task.ok()) {
    std::cerr << "--model: " << (codec.ok() ? task.status() : codec.status()).to_string() << "\n";
    return 2;
  }
  GreedyCheckOptions opts = o;
  opts.max_seq = std::min<int64_t>(o.max_seq, target->config().max_seq);
  if (opts.bfloat16) {  // the engines below find the probe's answer cached
    double t0 = runtime::now_s();
    model::DecodePrecision p = model::bfloat16_decode_precision(target);
    int64_t rows = p.rows;
    double s = runtime::now_s() - t0;
    std::printf("bfloat16 probe: %s (%zu shapes, %.1f s)\n  why: %s\n",
                rows == 0   ? "no row-invariant padding, decoding in float32"
                : rows == 1 ? "unpadded products are row-invariant"
                            : ("products padded to " + std::to_string(rows) + " rows").c_str(),
                model::decode_probe(target->config()).shapes.size(), s, p.reason.c_str());
  }
  torch::manual_seed(1);
  model::Drafter drafter(target, 1);
  drafter->eval();
  int differ = 0;
  for (int b : o.batches) {
    StatusOr<int> d = check_batch(target, drafter, **task, **codec, b, opts);
    if (!d.ok()) {
      std::cerr << d.status().to_string() << "\n";
      return 2;
    }
    differ += *d;
  }
  std::printf("greedy check: %s\n",
              differ == 0 ? "every response equals plain decoding's"
                          : (std::to_string(differ) + " runs differ from plain decoding: NOT "
                                                      "LOSSLESS")
                                .c_str());
  return differ == 0 ? 0 : 1;
}

}  // namespace tlt::bench
