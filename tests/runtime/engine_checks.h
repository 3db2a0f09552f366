// What the rollout engine's losslessness tests share: a peaked target, running an engine over
// requests, the plain and speculative options they compare, token-for-token equality, and the
// two-sample chi-square test of sampled tokens.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "runtime/rollout/engine.h"

namespace tlt::rollout::test_support {

// The engine's completions of `reqs` (a failed create or generate is a test failure); its stats
// into `stats` when given.
inline std::vector<Completion> run(model::Transformer target, model::Drafter drafter,
                                   EngineOptions opts, const std::vector<Request>& reqs,
                                   EngineStats* stats = nullptr) {
  auto engine = Engine::create(target, drafter, opts);
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  auto out = (*engine)->generate(reqs);
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  if (stats) *stats = (*engine)->stats();
  return *out;
}

inline EngineOptions plain_options(int64_t max_batch) {
  EngineOptions o;
  o.max_batch = max_batch;
  o.max_seq = 128;
  o.speculative = false;
  return o;
}

// Speculative decoding over `arms`: one arm fixed, several under the bucketed bandit; drafting
// switches on at `threshold` requests or fewer.
inline EngineOptions spec_options(int64_t max_batch, std::vector<std::string> arms,
                                  int64_t threshold = 1000) {
  EngineOptions o = plain_options(max_batch);
  o.speculative = true;
  o.activation_threshold = threshold;
  o.arms = std::move(arms);
  o.selector = o.arms.size() == 1 ? "fixed" : "bucketed-epsilon-greedy";
  return o;
}

// A float64 target of `config` whose next-token distributions are peaked by scaling its LM head
// (a random init is near-uniform, which would hide both good and bad drafting).
inline model::Transformer peaked_target(const model::ModelConfig& config, uint64_t seed,
                                        double head_scale) {
  torch::manual_seed(seed);
  model::Transformer t(config);
  t->to(torch::kFloat64);
  torch::NoGradGuard g;
  t->lm_head->weight.mul_(head_scale);
  t->eval();
  return t;
}

// Fails `what` for every request whose tokens differ (the first three named).
inline void expect_same_tokens(const std::vector<Completion>& a, const std::vector<Completion>& b,
                               const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  int mismatches = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].tokens != b[i].tokens && ++mismatches <= 3)
      ADD_FAILURE() << what << ": request " << i << " differs";
  }
  EXPECT_EQ(mismatches, 0) << what;
}

// Regularized upper incomplete gamma Q(a, x): the chi-square p-value is Q(df/2, stat/2).
inline double gamma_q(double a, double x) {
  if (x <= 0) return 1.0;
  double gln = std::lgamma(a);
  if (x < a + 1) {  // series for P
    double sum = 1.0 / a, del = sum, ap = a;
    for (int n = 0; n < 1000; ++n) {
      ap += 1;
      del *= x / ap;
      sum += del;
      if (std::fabs(del) < std::fabs(sum) * 1e-14) break;
    }
    return 1.0 - sum * std::exp(-x + a * std::log(x) - gln);
  }
  double b = x + 1 - a, c = 1e300, d = 1 / b, h = d;  // continued fraction for Q
  for (int i = 1; i < 1000; ++i) {
    double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::fabs(d) < 1e-300) d = 1e-300;
    c = b + an / c;
    if (std::fabs(c) < 1e-300) c = 1e-300;
    d = 1 / d;
    double del = d * c;
    h *= del;
    if (std::fabs(del - 1) < 1e-14) break;
  }
  return std::exp(-x + a * std::log(x) - gln) * h;
}

// Two-sample chi-square test of homogeneity over the values of token `pos`; cells with fewer
// than 10 pooled observations are merged into one. Returns the p-value.
inline double homogeneity_p(const std::vector<Completion>& a, const std::vector<Completion>& b,
                            size_t pos) {
  std::map<int64_t, std::pair<double, double>> cells;
  double na = 0, nb = 0;
  for (const Completion& c : a)
    if (c.tokens.size() > pos) cells[c.tokens[pos]].first++, na++;
  for (const Completion& c : b)
    if (c.tokens.size() > pos) cells[c.tokens[pos]].second++, nb++;
  std::vector<std::pair<double, double>> merged;
  std::pair<double, double> rare{0, 0};
  for (auto& [tok, n] : cells) {
    if (n.first + n.second < 10) {
      rare.first += n.first, rare.second += n.second;
    } else {
      merged.push_back(n);
    }
  }
  if (rare.first + rare.second > 0) merged.push_back(rare);
  double stat = 0;
  for (auto [x, y] : merged) {
    double tot = x + y;
    double ea = tot * na / (na + nb), eb = tot * nb / (na + nb);
    stat += (x - ea) * (x - ea) / ea + (y - eb) * (y - eb) / eb;
  }
  double df = double(merged.size()) - 1;
  return df < 1 ? 1.0 : gamma_q(df / 2, stat / 2);
}

}  // namespace tlt::rollout::test_support
