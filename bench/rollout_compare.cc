#include "bench/rollout_compare.h"

#include <algorithm>
#include <cstdio>

#include "runtime/clock.h"
#include "runtime/model/bfloat16_probe.h"

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

// The bandit's value of each arm, per context, after a run at `batch`.
void print_bandit(rollout::Engine& engine, int64_t batch) {
  const auto& sel = engine.selector();
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

// Decodes `reqs` after the engine has served `warmup` (a rollout worker's engine lives across
// steps, so its bandit has seen earlier batches; only the measured batch counts). The engine's
// errors (a malformed --arms entry).
StatusOr<Run> measure(model::Transformer target, model::Drafter drafter, int64_t batch,
                      const std::vector<rollout::Request>& warmup,
                      const std::vector<rollout::Request>& reqs, bool speculative,
                      std::vector<std::string> arms, int64_t threshold, int32_t shortcut,
                      const DecodeSettings& ds) {
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
  StatusOr<std::unique_ptr<rollout::Engine>> engine = rollout::Engine::create(target, drafter, eo);
  if (!engine.ok()) return engine.status();
  if (!warmup.empty()) {
    StatusOr<std::vector<rollout::Completion>> warm = (*engine)->generate(warmup);
    if (!warm.ok()) return warm.status();
  }
  (*engine)->reset_stats();
  StatusOr<std::vector<rollout::Completion>> out = (*engine)->generate(reqs);
  if (!out.ok()) return out.status();
  if (ds.show_bandit) print_bandit(**engine, batch);
  Run r;
  r.out = std::move(*out);
  r.stats = (*engine)->stats();
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
  bool must_match = t.temperature == 0.0 || t.decode.reproducible;
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

// The table's settings, then its column heads.
void print_header(const Table& t, const std::vector<NamedDrafter>& drafters) {
  const DecodeSettings& ds = t.decode;
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
}

// Each arm of each drafter alone on `reqs` at batch b (what the bandit could have had), against
// plain decoding's run; appends the rows to `summary`. The runs that lost plain decoding's tokens.
StatusOr<int> fixed_arms(model::Transformer target, const std::vector<NamedDrafter>& drafters,
                         const Table& t, int b, const std::vector<rollout::Request>& reqs,
                         const Run& plain, std::vector<SummaryRow>* summary) {
  int lost = 0;
  for (const NamedDrafter& nd : drafters) {
    for (const std::string& arm : t.arms) {
      StatusOr<Run> r =
          measure(target, nd.drafter, b, {}, reqs, true, {arm}, 32, t.shortcut, t.decode);
      if (!r.ok()) return r.status();
      double ratio = r->tokens_per_s / plain.tokens_per_s;
      bool differ =
          (t.temperature == 0.0 || t.decode.reproducible) && !same_tokens(plain.out, r->out);
      lost += differ;
      std::printf("       fixed %-5s %-6s %12.1f %7.2fx %8.2f %8lld %6.2f%s\n", nd.name.c_str(),
                  arm.c_str(), r->tokens_per_s, ratio, r->accept, (long long)r->stats.copied_drafts,
                  kept(r->stats), differ ? " outputs DIFFERENT (not lossless)" : "");
      summary->push_back({nd.name, arm, b, t.temperature, r->accept, ratio});
    }
    std::fflush(stdout);
  }
  return lost;
}

// Batch b of the table: plain decoding once, each drafter's adaptive engine against it (the
// faster of t.repeats alternating runs each), then the fixed arms where t.fixed names b. The
// runs that lost plain decoding's tokens.
StatusOr<int> compare_batch(model::Transformer target, const std::vector<NamedDrafter>& drafters,
                            const Table& t, int b, const RequestMaker& make,
                            std::vector<SummaryRow>* summary) {
  // `waves` batches of b requests: each wave decodes at batch b until its responses end and the
  // next one joins as it leaves.
  int w = b >= 64 ? 1 : t.waves;
  StatusOr<std::vector<rollout::Request>> reqs = make(b * w, 0);
  if (!reqs.ok()) return reqs.status();
  // Warm-up: earlier batches of other prompts (offsets past the measured ones).
  std::vector<rollout::Request> warm;
  for (int k = 0; k < t.warmup_batches; ++k) {
    StatusOr<std::vector<rollout::Request>> more = make(b, 100 + 37 * k);
    if (!more.ok()) return more.status();
    warm.insert(warm.end(), more->begin(), more->end());
  }
  Run plain;
  std::vector<Run> spec(drafters.size());
  for (int r = 0; r < std::max(1, t.repeats); ++r) {
    StatusOr<Run> p = measure(target, drafters.front().drafter, b, warm, *reqs, false, t.arms, 32,
                              t.shortcut, t.decode);
    if (!p.ok()) return p.status();
    if (p->tokens_per_s > plain.tokens_per_s) plain = std::move(*p);
    for (size_t d = 0; d < drafters.size(); ++d) {
      StatusOr<Run> s = measure(target, drafters[d].drafter, b, warm, *reqs, true, t.arms, 32,
                                t.shortcut, t.decode);
      if (!s.ok()) return s.status();
      if (s->tokens_per_s > spec[d].tokens_per_s) spec[d] = std::move(*s);
    }
  }
  print_phases("plain", plain.stats);
  int lost = 0;
  for (size_t d = 0; d < drafters.size(); ++d) {
    lost += print_row(b, drafters[d].name, plain, spec[d], t);
    summary->push_back({drafters[d].name, "adaptive", b, t.temperature, spec[d].accept,
                        spec[d].tokens_per_s / plain.tokens_per_s});
  }
  std::fflush(stdout);
  if (std::find(t.fixed.begin(), t.fixed.end(), b) == t.fixed.end()) return lost;
  StatusOr<int> fixed = fixed_arms(target, drafters, t, b, *reqs, plain, summary);
  if (!fixed.ok()) return fixed.status();
  return lost + *fixed;
}

}  // namespace

StatusOr<int> compare(model::Transformer target, const std::vector<NamedDrafter>& drafters,
                      const Table& t, const RequestMaker& make, std::vector<SummaryRow>* summary) {
  print_header(t, drafters);
  int lost = 0;  // runs whose outputs should have been plain decoding's and are not
  for (int b : t.batches) {
    StatusOr<int> l = compare_batch(target, drafters, t, b, make, summary);
    if (!l.ok()) return l.status();
    lost += *l;
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

void print_precision(model::Transformer target, const Table& t) {
  if (!t.decode.bfloat16) return;
  double t0 = runtime::now_s();
  model::DecodePrecision p = model::bfloat16_decode_precision(target);
  std::printf("bfloat16 probe: %s (%.1f s)\n", p.reason.c_str(), runtime::now_s() - t0);
  std::fflush(stdout);
}

}  // namespace tlt::bench
