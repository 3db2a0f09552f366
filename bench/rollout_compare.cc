#include "bench/rollout_compare.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "runtime/model/bfloat16_probe.h"
#include "runtime/model/precision.h"

namespace tlt::bench {

namespace {

struct Run {
  double tokens_per_s = 0, accept = 0;
  rollout::EngineStats stats;
  std::vector<rollout::Completion> out;
};

// Whether `spec` gave plain decoding's tokens for every request.
bool same_tokens(const std::vector<rollout::Completion>& plain,
                 const std::vector<rollout::Completion>& spec) {
  bool same = plain.size() == spec.size();
  for (size_t i = 0; same && i < plain.size(); ++i) same = plain[i].tokens == spec[i].tokens;
  return same;
}

// One run's time by engine phase (EngineStats::phases), in seconds and as a share of the run.
void print_phases(const char* label, const rollout::EngineStats& s) {
  std::printf("       %-6s phases:", label);
  for (const auto& [name, sec] : s.phases.named(s.seconds))
    if (sec >= 0.0005 || name == "other") std::printf(" %s %.3fs", name.c_str(), sec);
  std::printf(" (total %.3fs)\n", s.seconds);
}

double kept(const rollout::EngineStats& s) {
  return s.drafted ? double(s.accepted) / double(s.drafted) : 0.0;
}

// Decodes `reqs` after the engine has served `warmup` (a rollout worker's engine lives across
// steps, so its bandit has seen earlier batches; only the measured batch counts).
Run measure(model::Transformer target, model::Drafter drafter, int64_t batch,
            const std::vector<rollout::Request>& warmup, const std::vector<rollout::Request>& reqs,
            bool speculative, std::vector<std::string> arms, int64_t threshold, int32_t shortcut) {
  const DecodeSettings& ds = decode_settings();
  rollout::EngineOptions eo;
  eo.max_batch = batch;
  eo.max_seq = ds.max_seq;
  eo.speculative = speculative;
  eo.arms = arms;
  eo.selector = arms.size() == 1 ? "fixed" : "bucketed-epsilon-greedy";
  eo.activation_threshold = threshold;
  eo.ngram_shortcut = shortcut;
  eo.selector_value = ds.selector_value;
  eo.selector_exploration = ds.exploration;
  eo.drafter_catch_up_limit = ds.catch_up_limit;
  eo.draft_confidence = ds.draft_confidence;
  eo.epsilon = ds.epsilon;
  eo.plain_floor = ds.plain_floor;
  eo.reproducible = ds.reproducible;
  eo.coupled_drafts = ds.coupled_drafts;
  eo.coupling_noise = ds.coupling_noise;
  eo.bfloat16 = ds.bfloat16;
  auto created = rollout::Engine::create(target, drafter, eo);
  if (!created.ok()) {  // e.g. a malformed --arms entry
    std::cerr << created.status().to_string() << "\n";
    std::exit(2);
  }
  auto engine = std::move(created).value();
  if (!warmup.empty()) engine->generate(warmup).value();
  engine->reset_stats();
  std::vector<rollout::Completion> out = engine->generate(reqs).value();
  if (ds.show_bandit) {  // the bandit's value of each arm, per context
    auto& sel = engine->selector();
    bool speedup = sel.plain_seconds_per_token(batch) > 0;  // valued against plain decoding
    for (int c = 0; c < sel.contexts(); ++c) {
      std::printf("    bandit b=%lld %s (%s):", (long long)batch, c ? "copyable" : "drafting",
                  speedup ? "x plain" : "tok/s");
      for (int a = 0; a < sel.n_arms(); ++a) {
        int32_t cell = sel.cell_of(batch, c);
        if (speedup)  // with its standard error
          std::printf(" %.2f~%.2f", sel.value(cell, a), sel.standard_error(cell, a));
        else
          std::printf(" %.0f", sel.value(cell, a));
      }
      std::printf("\n");
    }
  }
  Run r;
  r.out = std::move(out);
  r.stats = engine->stats();
  r.tokens_per_s = r.stats.tokens / r.stats.seconds;
  r.accept = r.stats.accept_length();
  return r;
}

// "0", "0.7", "1": a temperature as --temperatures takes it.
std::string format_temperature(double t) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", t);
  return buf;
}

// One drafter's adaptive row of a table against plain decoding, its phases and whether its
// outputs are plain decoding's. True when they should have been and are not.
bool print_row(int b, const std::string& name, const Run& plain, const Run& spec, const Table& t) {
  std::string usage;
  for (size_t a = 0; a < t.arms.size(); ++a)
    usage += t.arms[a] + ":" + std::to_string(spec.stats.arm_steps[a]) + " ";
  usage += "plain:" + std::to_string(spec.stats.plain_chosen);
  std::printf("%6d %-6s %12.1f %12.1f %7.2fx %8.2f %8lld %6.2f %s\n", b, name.c_str(),
              plain.tokens_per_s, spec.tokens_per_s, spec.tokens_per_s / plain.tokens_per_s,
              spec.accept, (long long)spec.stats.copied_drafts, kept(spec.stats), usage.c_str());
  print_phases("tlt", spec.stats);
  bool same = same_tokens(plain.out, spec.out);
  // Greedy and reproducible sampling must give plain decoding's tokens; rejection sampling
  // (--reproducible 0) gives other draws from the same distribution, which the tests check
  // (tests/runtime/rollout_test.cc, chi-square), not this bench.
  bool must_match = t.temperature == 0.0 || decode_settings().reproducible;
  int64_t rows = spec.stats.bfloat16_rows;
  std::string products = !spec.stats.bfloat16 ? "float32"
                         : rows <= 1 ? "bfloat16, unpadded"
                                     : "bfloat16, padded to " + std::to_string(rows) + " rows";
  std::printf("       outputs: %s; products in %s\n",
              same         ? "identical token for token"
              : must_match ? "DIFFERENT (not lossless)"
                           : "other draws (rejection sampling: same distribution, not the same "
                             "tokens)",
              products.c_str());
  return must_match && !same;
}

}  // namespace

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

DecodeSettings& decode_settings() {
  static DecodeSettings settings;
  return settings;
}

// For each batch size: plain vs adaptive tokens/s on the same requests (the faster of `repeats`
// alternating runs each), the accepted length, arm use and phases; at t.fixed batch sizes each
// arm alone too. Plain decoding runs once per batch size; each drafter of `drafters` runs the
// adaptive engine (and the fixed arms) against it. Appends every measured row to `summary`.
int compare(model::Transformer target, const std::vector<NamedDrafter>& drafters, const Table& t,
            const RequestMaker& make, std::vector<SummaryRow>* summary) {
  const DecodeSettings& ds = decode_settings();
  int lost = 0;  // runs whose outputs should have been plain decoding's and are not
  std::printf(
      "\nthreads=%d temperature=%.1f max_new=%d arms=%s threshold=32 "
      "ngram-shortcut=%d warm-up batches=%d waves=%d repeats=%d draft vocabulary=%lld "
      "selector value=%s exploration=%s epsilon=%.2f catch-up limit=%d draft confidence=%.2f "
      "group=%d plain floor=%d reproducible=%d coupled drafts=%d coupling noise=%.2f\n",
      t.threads, t.temperature, t.max_new, t.arms_s.c_str(), t.shortcut, t.warmup_batches, t.waves,
      t.repeats, (long long)drafters.front().drafter->draft_vocab_size(), ds.selector_value.c_str(),
      ds.exploration.c_str(), ds.epsilon, ds.catch_up_limit, ds.draft_confidence, t.group,
      int(ds.plain_floor), int(ds.reproducible), int(ds.coupled_drafts), ds.coupling_noise);
  // kept: the share of verified drafted tokens that were accepted.
  std::printf("%6s %-6s %12s %12s %8s %8s %8s %6s %s\n", "batch", "feats", "plain tok/s",
              "tlt tok/s", "ratio", "accept", "copied", "kept", "arm steps");
  for (int b : t.batches) {
    // `waves` batches of b requests: each wave decodes at batch b until its responses end and
    // the next one joins as it leaves.
    int w = b >= 64 ? 1 : t.waves;
    std::vector<rollout::Request> reqs = make(b * w, 0);
    // Warm-up: earlier batches of other prompts (offsets past the measured ones).
    std::vector<rollout::Request> warm;
    for (int k = 0; k < t.warmup_batches; ++k) {
      std::vector<rollout::Request> more = make(b, 100 + 37 * k);
      warm.insert(warm.end(), more.begin(), more.end());
    }
    std::vector<Run> plain(1), spec(drafters.size());
    for (int r = 0; r < std::max(1, t.repeats); ++r) {
      Run p =
          measure(target, drafters.front().drafter, b, warm, reqs, false, t.arms, 32, t.shortcut);
      if (p.tokens_per_s > plain[0].tokens_per_s) plain[0] = p;
      for (size_t d = 0; d < drafters.size(); ++d) {
        Run s = measure(target, drafters[d].drafter, b, warm, reqs, true, t.arms, 32, t.shortcut);
        if (s.tokens_per_s > spec[d].tokens_per_s) spec[d] = s;
      }
    }
    print_phases("plain", plain[0].stats);
    for (size_t d = 0; d < drafters.size(); ++d) {
      lost += print_row(b, drafters[d].name, plain[0], spec[d], t);
      summary->push_back({drafters[d].name, "adaptive", b, t.temperature, spec[d].accept,
                          spec[d].tokens_per_s / plain[0].tokens_per_s});
    }
    std::fflush(stdout);
    if (std::find(t.fixed.begin(), t.fixed.end(), b) == t.fixed.end()) continue;
    // Each arm alone on the same requests: what the bandit could have had.
    for (const NamedDrafter& nd : drafters) {
      for (const std::string& arm : t.arms) {
        Run r = measure(target, nd.drafter, b, {}, reqs, true, {arm}, 32, t.shortcut);
        double ratio = r.tokens_per_s / plain[0].tokens_per_s;
        bool differ =
            (t.temperature == 0.0 || ds.reproducible) && !same_tokens(plain[0].out, r.out);
        lost += differ;
        std::printf("       fixed %-5s %-6s %12.1f %7.2fx %8.2f %8lld %6.2f%s\n", nd.name.c_str(),
                    arm.c_str(), r.tokens_per_s, ratio, r.accept, (long long)r.stats.copied_drafts,
                    kept(r.stats), differ ? " outputs DIFFERENT (not lossless)" : "");
        summary->push_back({nd.name, arm, b, t.temperature, r.accept, ratio});
      }
      std::fflush(stdout);
    }
  }
  return lost;
}

// The summary of every table: per drafter, batch size and arm, the accept length and the ratio
// to plain decoding at each temperature, side by side.
void print_summary(const std::vector<SummaryRow>& rows, const std::vector<double>& temperatures) {
  std::printf("\nside by side: accept length (ratio to plain) per temperature\n");
  std::printf("%-6s %6s %-9s", "feats", "batch", "arm");
  for (double t : temperatures) std::printf("  %16s", ("T=" + format_temperature(t)).c_str());
  std::printf("\n");
  std::vector<std::string> seen;
  for (const SummaryRow& r : rows) {
    std::string key = r.drafter + "/" + std::to_string(r.batch) + "/" + r.arm;
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
    seen.push_back(key);
    std::printf("%-6s %6d %-9s", r.drafter.c_str(), r.batch, r.arm.c_str());
    for (double t : temperatures) {
      auto it = std::find_if(rows.begin(), rows.end(), [&](const SummaryRow& x) {
        return x.drafter == r.drafter && x.batch == r.batch && x.arm == r.arm && x.temperature == t;
      });
      if (it == rows.end()) {
        std::printf("  %16s", "-");
      } else {
        char cell[32];
        std::snprintf(cell, sizeof cell, "%.2f (%.2fx)", it->accept, it->ratio);
        std::printf("  %16s", cell);
      }
    }
    std::printf("\n");
  }
  std::fflush(stdout);
}

// Seconds of one target forward of b x k new tokens per request over a cache already holding
// `context` positions per request: a plain decode step at k = 1, a chain verify of k - 1 drafts
// otherwise. The fastest of `reps` (noise only ever slows a forward); nothing is committed, so
// every repetition rewrites the same positions.
// `capacity`: positions the cache holds per request (0: just enough).
double forward_seconds(model::Transformer target, int64_t b, int64_t k, int64_t context, int reps,
                       int64_t capacity) {
  torch::NoGradGuard no_grad;
  int64_t rows = decode_settings().bfloat16 ? model::bfloat16_decode_rows(target) : 0;
  model::Bfloat16Inference bfloat16(rows > 0, rows);
  int64_t vocab = target->config().vocab;
  auto cache = target->make_cache(b, std::max(capacity, context + k + 1));
  for (int64_t i = 0; i < b; ++i) cache->add_slot();
  torch::Tensor zero = torch::zeros({b}, torch::kInt64);                      // (b,)
  torch::Tensor prompt = torch::randint(vocab, {b, context}, torch::kInt64);  // (b, context)
  // Prefilled 16 positions at a time: a forward's logits are (b, T, V), 400 MB for a 49152-token
  // vocabulary at b = 16, T = 128, which would swamp the model's own memory in the peak RSS.
  for (int64_t s = 0; s < context; s += 16) {
    int64_t n = std::min<int64_t>(16, context - s);
    target->forward(prompt.slice(1, s, s + n), model::sequential_positions(zero + s, n),
                    cache.get());  // (b, n) tokens
    for (int64_t i = 0; i < b; ++i) cache->commit_prefix(i, n);
  }
  torch::Tensor tokens = torch::randint(vocab, {b, k}, torch::kInt64);       // (b, k)
  torch::Tensor positions = model::sequential_positions(zero + context, k);  // (b, k)
  double best = 1e30;
  for (int r = 0; r < reps + 2; ++r) {  // two warm-up forwards
    double t0 = now();
    target->forward(tokens, positions, cache.get());
    if (r >= 2) best = std::min(best, now() - t0);
  }
  return best;
}

// The most any drafting strategy can gain at batch b on this machine: verifying k tokens per
// request in one forward against k plain steps, as if every draft were accepted and drafting
// cost nothing, i.e. max over k of k * T(b, 1) / T(b, k). Where decoding is bound by reading
// the weights (a GPU, or batch 1 here), T(b, k) barely grows with k and the bound is large;
// where it is bound by arithmetic, T(b, k) grows like k and the bound nears 1.
void print_ceiling(model::Transformer target, const std::vector<int>& batches, int64_t context) {
  const std::vector<int64_t> widths{2, 3, 5, 7, 8};
  std::printf(
      "\nspeculation ceiling (every draft accepted, drafting free; context %lld tokens):\n"
      "%6s %12s",
      (long long)context, "batch", "plain ms");
  for (int64_t k : widths) std::printf("   k=%lld ms", (long long)k);
  std::printf(" %9s\n", "ceiling");
  for (int b : batches) {
    double t1 = forward_seconds(target, b, 1, context, 10);
    double ceiling = 1.0;
    std::printf("%6d %12.2f", b, 1e3 * t1);
    for (int64_t k : widths) {
      double tk = forward_seconds(target, b, k, context, 10);
      ceiling = std::max(ceiling, double(k) * t1 / tk);
      std::printf(" %9.2f", 1e3 * tk);
    }
    std::printf(" %8.2fx\n", ceiling);
    std::fflush(stdout);
  }
}

}  // namespace tlt::bench
