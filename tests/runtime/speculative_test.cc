// Draft trees, acceptance rules, sampling helpers, the n-gram proposer and the arm bandit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>
#include <random>

#include "runtime/rollout/ngram.h"
#include "runtime/rollout/sampling.h"
#include "runtime/rollout/selector.h"
#include "runtime/rollout/speculative.h"

namespace tlt::rollout {
namespace {

TEST(Sampling, ArgmaxTiesGoToLowestIndex) {
  std::vector<double> l{1, 3, 3, 2};
  EXPECT_EQ(argmax(l.data(), 4), 1);
}

TEST(Sampling, TopPKeepsSmallestSetReachingMass) {
  std::vector<double> l{std::log(0.5), std::log(0.3), std::log(0.15), std::log(0.05)};
  std::vector<double> p = sampling_probs(l.data(), 4, {1.0, 0.8});
  EXPECT_NEAR(p[0], 0.5 / 0.8, 1e-12);
  EXPECT_NEAR(p[1], 0.3 / 0.8, 1e-12);
  EXPECT_EQ(p[2], 0.0);
  EXPECT_EQ(p[3], 0.0);
  std::vector<double> t = sampling_probs(l.data(), 4, {2.0, 1.0});  // flatter at T=2
  EXPECT_LT(t[0], 0.5);
  EXPECT_NEAR(std::accumulate(t.begin(), t.end(), 0.0), 1.0, 1e-12);
}

// sampling_probs computes its exponentials itself (the same bits on every machine); they must be
// softmax's to double precision, down to weights too small to matter.
TEST(Sampling, ProbabilitiesAreSoftmaxToDoublePrecision) {
  std::mt19937_64 g(4);
  std::vector<double> l(1003);  // not a multiple of the vector width: the remainder counts too
  for (double& x : l) x = std::normal_distribution<double>(0.0, 8.0)(g);
  l[17] = 40.0, l[18] = -700.0;
  for (double t : {0.3, 0.7, 1.0}) {
    std::vector<double> p = sampling_probs(l.data(), int64_t(l.size()), {t, 1.0});
    std::vector<double> ref(l.size());
    double sum = 0.0;
    for (size_t i = 0; i < l.size(); ++i) sum += ref[i] = std::exp((l[i] - 40.0) / t);
    for (size_t i = 0; i < l.size(); ++i) {
      ref[i] /= sum;
      EXPECT_NEAR(p[i], ref[i], 1e-14 * ref[i] + 1e-300) << "token " << i << " at T=" << t;
    }
  }
}

// The rollout engine hands float logits over; they must give exactly what their doubles give.
TEST(Sampling, FloatLogitsGiveTheirDoublesResults) {
  std::mt19937_64 g(8);
  std::vector<float> f(4099);
  for (float& x : f) x = float(std::normal_distribution<double>(0.0, 4.0)(g));
  f[3000] = f[77] = 30.0f;  // a tie: the lower index wins
  std::vector<double> d(f.begin(), f.end());
  EXPECT_EQ(argmax(f.data(), int64_t(f.size())), 77);
  EXPECT_EQ(argmax(d.data(), int64_t(d.size())), 77);
  EXPECT_EQ(argmax(f.data(), 5), argmax(d.data(), 5));
  for (double t : {0.5, 1.0}) {
    EXPECT_EQ(sampling_probs(f.data(), int64_t(f.size()), {t, 1.0}),
              sampling_probs(d.data(), int64_t(d.size()), {t, 1.0}));
    EXPECT_EQ(sampling_probs(f.data(), int64_t(f.size()), {t, 0.9}),
              sampling_probs(d.data(), int64_t(d.size()), {t, 0.9}));
  }
}

TEST(Sampling, SampleFollowsProbabilities) {
  Rng rng(7);
  std::vector<double> p{0.1, 0.0, 0.6, 0.3};
  std::vector<int> n(4);
  for (int i = 0; i < 20000; ++i) ++n[sample(p, rng)];
  EXPECT_EQ(n[1], 0);
  EXPECT_NEAR(n[2] / 20000.0, 0.6, 0.015);
  EXPECT_NEAR(n[0] / 20000.0, 0.1, 0.01);
}

// A vocabulary like a language model's at temperature: a few likely tokens and a long tail.
std::vector<double> skewed_probs(int64_t v, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::vector<double> p(static_cast<size_t>(v));
  double sum = 0.0;
  for (int64_t i = 0; i < v; ++i) {
    double logit = std::normal_distribution<double>(0.0, 3.0)(g);
    sum += p[size_t(i)] = std::exp(logit);
  }
  for (double& x : p) x /= sum;
  p[size_t(v / 2)] = 0.0;  // a token top-p dropped
  return p;
}

// The race skips the logarithm of indices that cannot win; it must pick exactly the index a race
// that takes every logarithm picks.
TEST(Sampling, RaceEqualsTheRaceWithoutShortcuts) {
  for (uint64_t seed = 0; seed < 20; ++seed) {
    std::vector<double> p = skewed_probs(3000, seed);
    for (uint64_t key = 0; key < 200; ++key) {
      uint64_t k = key * 0x632be59bd9b4e019ull + seed;
      int64_t want = -1;
      double best = -INFINITY;
      for (int64_t i = 0; i < int64_t(p.size()); ++i) {
        if (p[size_t(i)] <= 0.0) continue;
        double s = std::log(race_uniform(k, i)) / p[size_t(i)];
        if (s > best) best = s, want = i;
      }
      ASSERT_EQ(race(p, k), want) << "seed " << seed << " key " << k;
    }
  }
}

// A race over a subset of the vocabulary (the drafter's) picks the token the race over the whole
// vocabulary picks when the other tokens have probability 0.
TEST(Sampling, RaceOverSubsetEqualsRaceOverVocabulary) {
  std::vector<double> full = skewed_probs(3001, 2), sub;
  std::vector<int64_t> ids;
  double kept = 0.0;
  for (int64_t i = 0; i < int64_t(full.size()); ++i) {
    if ((i * 7919) % 5 != 0) {
      full[size_t(i)] = 0.0;  // outside the subset
    } else {
      ids.push_back(i);
      kept += full[size_t(i)];
    }
  }
  std::reverse(ids.begin(), ids.end());  // a subset in another order than the vocabulary's
  for (int64_t id : ids) sub.push_back(full[size_t(id)] / kept);
  for (double& p : full) p /= kept;
  for (uint64_t key = 1; key < 300; ++key) {
    uint64_t k = key * 0x9e3779b97f4a7c15ull;
    ASSERT_EQ(ids[size_t(race(sub, k, ids.data()))], race(full, k)) << "key " << k;
  }
}

// Over random keys the race's winner is distributed as the probabilities: a chi-square test over
// the 8 likeliest tokens and the rest of the tail (8 degrees of freedom; 40 is p < 1e-5).
TEST(Sampling, RaceFollowsProbabilities) {
  std::vector<double> p = skewed_probs(5000, 11);
  std::vector<int64_t> order(p.size());
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + 8, order.end(),
                    [&](int64_t a, int64_t b) { return p[size_t(a)] > p[size_t(b)]; });
  std::vector<int> bin(p.size(), 8);
  for (int j = 0; j < 8; ++j) bin[size_t(order[size_t(j)])] = j;
  std::vector<double> expected(9, 0.0);
  for (size_t i = 0; i < p.size(); ++i) expected[size_t(bin[i])] += p[i];
  const int n = 60000;
  std::vector<double> seen(9, 0.0);
  Rng rng(5);
  for (int t = 0; t < n; ++t) {
    int64_t w = sample(p, rng);
    ASSERT_GT(p[size_t(w)], 0.0) << "a token of probability 0 won";
    seen[size_t(bin[size_t(w)])] += 1.0;
  }
  double chi2 = 0.0;
  for (int j = 0; j < 9; ++j) chi2 += std::pow(seen[j] - n * expected[j], 2) / (n * expected[j]);
  std::printf("race: chi-square %.2f over 9 bins (tail mass %.3f)\n", chi2, expected[8]);
  EXPECT_LT(chi2, 40.0);
}

// Two close distributions raced at the same key agree at least (1 - TV) / (1 + TV) of the time
// (here every token's probability is off by a random factor, as a drafter's would be).
TEST(Sampling, RacesAtOneKeyCoupleCloseDistributions) {
  std::vector<double> p = skewed_probs(2000, 3), q(p.size());
  std::mt19937_64 g(9);
  double sum = 0.0;
  for (size_t i = 0; i < p.size(); ++i)
    sum += q[i] = p[i] * std::exp(std::normal_distribution<double>(0.0, 0.3)(g));
  double tv = 0.0;
  for (size_t i = 0; i < p.size(); ++i) tv += 0.5 * std::abs(p[i] - (q[i] /= sum));
  const int n = 20000;
  int same = 0;
  for (int t = 0; t < n; ++t) {
    uint64_t key = g();
    same += race(p, key) == race(q, key);
  }
  double bound = (1 - tv) / (1 + tv);
  std::printf("races at one key: agree %.3f, TV %.3f, bound %.3f\n", double(same) / n, tv, bound);
  EXPECT_GT(double(same) / n, bound - 0.02);  // 0.02: ~6 binomial standard deviations
}

// Tree: 0 root; 1,2 children of 0; 3 child of 1; 4 child of 2; 5 child of 4.
DraftTree sample_tree() {
  DraftTree t(10);
  t.add(11, 0, -0.1);  // 1
  t.add(12, 0, -0.5);  // 2
  t.add(13, 1, -0.9);  // 3
  t.add(14, 2, -0.6);  // 4
  t.add(15, 4, -0.7);  // 5
  return t;
}

TEST(DraftTree, AncestorMask) {
  DraftTree t = sample_tree();
  std::vector<uint8_t> m = t.ancestor_mask();
  auto at = [&](int i, int j) { return m[i * 6 + j]; };
  EXPECT_TRUE(at(5, 5) && at(5, 4) && at(5, 2) && at(5, 0));
  EXPECT_FALSE(at(5, 1) || at(5, 3));
  EXPECT_TRUE(at(3, 1) && at(3, 0));
  EXPECT_FALSE(at(1, 2));
}

TEST(DraftTree, PrunedKeepsBestAncestorClosed) {
  DraftTree p = sample_tree().pruned(4);  // root + 1 (-0.1), 2 (-0.5), 4 (-0.6)
  ASSERT_EQ(p.size(), 4);
  std::multiset<int64_t> toks;
  for (int i = 0; i < p.size(); ++i) toks.insert(p.node(i).token);
  EXPECT_EQ(toks, (std::multiset<int64_t>{10, 11, 12, 14}));
  for (int i = 1; i < p.size(); ++i) {
    EXPECT_LT(p.node(i).parent, i) << "parents precede children";
    EXPECT_EQ(p.node(i).depth, p.node(p.node(i).parent).depth + 1);
  }
}

TEST(DraftTree, PrunedDropsNodesScoringBelowTheFloor) {
  DraftTree p = sample_tree().pruned(6, -0.55);  // root + 1 (-0.1), 2 (-0.5); 4 (-0.6) is out
  ASSERT_EQ(p.size(), 3);
  std::multiset<int64_t> toks;
  for (int i = 0; i < p.size(); ++i) toks.insert(p.node(i).token);
  EXPECT_EQ(toks, (std::multiset<int64_t>{10, 11, 12}));
  EXPECT_EQ(sample_tree().pruned(6, -1.0).size(), 6);
  EXPECT_EQ(sample_tree().pruned(6, 0.0).size(), 1) << "the root always stays";
}

// Logits for 6 nodes over a vocabulary of 20, each row peaked at `best[i]`.
std::vector<float> peaked_logits(const std::vector<int64_t>& best, int64_t v = 20) {
  std::vector<float> l(best.size() * v, 0.0f);
  for (size_t i = 0; i < best.size(); ++i) l[i * v + best[i]] = 10.0;
  return l;
}

TEST(Accept, GreedyFollowsTargetArgmax) {
  DraftTree t = sample_tree();
  // Target after root wants 12 (node 2), after node 2 wants 14 (node 4), after 4 wants 7.
  std::vector<float> l = peaked_logits({12, 0, 14, 0, 7, 0});
  Verdict v = accept_greedy(t, {l.data(), 20});
  EXPECT_EQ(v.path, (std::vector<int32_t>{0, 2, 4}));
  EXPECT_EQ(v.next_token, 7);
  EXPECT_EQ(v.accepted(), 2);
  // Bonus token at a leaf.
  l = peaked_logits({12, 0, 14, 0, 15, 3});
  v = accept_greedy(t, {l.data(), 20});
  EXPECT_EQ(v.path, (std::vector<int32_t>{0, 2, 4, 5}));
  EXPECT_EQ(v.next_token, 3);
}

TEST(Accept, RejectionChainAcceptsWhenDrafterEqualsTarget) {
  DraftTree chain(1);
  chain.add(2, 0, 0);
  chain.add(3, 1, 0);
  std::vector<float> l = peaked_logits({2, 3, 4}, 8);
  std::vector<std::vector<double>> q;
  for (int k = 0; k < 2; ++k) {
    q.push_back(sampling_probs(l.data() + k * 8, 8, {1.0, 1.0}));
  }
  Rng rng(1);
  int full = 0;
  for (int i = 0; i < 200; ++i) {
    Verdict v = accept_rejection_chain(chain, {l.data(), 8}, q, {1.0, 1.0}, rng);
    full += v.accepted() == 2;
  }
  EXPECT_EQ(full, 200) << "q == p accepts every drafted token";
}

TEST(Accept, RejectionChainResidualNeverRepeatsRejectedToken) {
  // Drafter is sure of token 5; target puts a little mass on 5: on rejection, 5 cannot come out.
  DraftTree chain(0);
  chain.add(5, 0, 0);
  std::vector<float> l{0, std::log(3.0f), 0, 0, 0, std::log(0.5f), 0, 0};
  l.resize(16, 0.0f);
  std::vector<double> q(8, 0.0);
  q[5] = 1.0;
  Rng rng(3);
  for (int i = 0; i < 500; ++i) {
    Verdict v = accept_rejection_chain(chain, {l.data(), 8}, {q}, {1.0, 1.0}, rng);
    if (v.accepted() == 0) {
      EXPECT_NE(v.next_token, 5);
    }
  }
}

TEST(Ngram, ProposesContinuationOfLatestMatch) {
  std::vector<int64_t> ctx{1, 2, 3, 9, 1, 2, 3, 8, 5, 1, 2, 3};
  EXPECT_EQ(ngram_propose(ctx, 3), (std::vector<int64_t>{8, 5, 1}));
  EXPECT_TRUE(ngram_propose({1, 2, 3}, 3).empty());
  EXPECT_EQ(ngram_propose({4, 7, 4}, 2), (std::vector<int64_t>{7, 4}));
}

// A selector's options over `buckets` and `n_arms` arms; the rest at their defaults.
ArmSelector::Options selector_options(std::vector<int32_t> buckets, int32_t n_arms, double epsilon,
                                      int32_t window, uint64_t seed) {
  ArmSelector::Options o;
  o.buckets = std::move(buckets);
  o.n_arms = n_arms;
  o.epsilon = epsilon;
  o.window = window;
  o.seed = seed;
  return o;
}

// The same with a floor under arm `reference` (plain decoding).
ArmSelector::Options floor_options(std::vector<int32_t> buckets, int32_t n_arms, double epsilon,
                                   int32_t window, uint64_t seed, int32_t reference) {
  ArmSelector::Options o = selector_options(std::move(buckets), n_arms, epsilon, window, seed);
  o.reference = reference;
  return o;
}

TEST(Selector, BucketsByBatchSize) {
  ArmSelector s(selector_options({1, 2, 5, 21}, 2, 0.1, 8, 0));
  EXPECT_EQ(s.bucket_of(1), 0);
  EXPECT_EQ(s.bucket_of(4), 1);
  EXPECT_EQ(s.bucket_of(5), 2);
  EXPECT_EQ(s.bucket_of(64), 3);
}

TEST(Selector, ConvergesToBestArmAndKeepsExploring) {
  const double eps = 0.1;
  ArmSelector s(selector_options({1, 8}, 4, eps, 16, 42));
  std::mt19937_64 noise(5);
  std::normal_distribution<double> n01(0.0, 0.5);
  // The best arm differs per bucket: arm 3 for small batches, arm 0 for large ones.
  auto mean = [](int bucket, int arm) { return bucket == 0 ? 1.0 + arm : 4.0 - arm; };
  std::map<int, int> picks_small, picks_large;
  const int rounds = 4000;
  for (int i = 0; i < rounds; ++i) {
    int64_t batch = (i % 2) ? 1 : 16;
    int arm = s.choose(batch);
    (batch == 1 ? picks_small : picks_large)[arm]++;
    s.report(batch, arm, mean(s.bucket_of(batch), arm) + n01(noise));
  }
  EXPECT_EQ(s.best(0), 3);
  EXPECT_EQ(s.best(1), 0);
  // Exploitation picks the best arm; exploration picks uniformly: best gets ~(1-eps) + eps/4.
  double share_best = picks_small[3] / (rounds / 2.0);
  EXPECT_NEAR(share_best, 1 - eps + eps / 4, 0.03);
  double explore_rate = double(s.explorations()) / rounds;
  EXPECT_NEAR(explore_rate, eps, 0.02);
  for (int arm = 0; arm < 4; ++arm) EXPECT_GT(picks_large[arm], 20) << "every arm is still tried";
}

TEST(Selector, WeightedExplorationTriesArmsInProportionToTheirValue) {
  // Constant rates 100, 50 and 10 tokens/s: once each arm has its min_samples steps, an
  // exploration step picks them in the ratio 10 : 5 : 1, while exploring at rate epsilon still.
  const double eps = 0.3;
  ArmSelector::Options weighted = selector_options({1}, 3, eps, 16, 11);
  weighted.explore = ArmSelector::Explore::kWeighted;
  ArmSelector s(weighted);
  const double rate[3] = {100.0, 50.0, 10.0};
  for (int i = 0; i < 9; ++i) {  // the min_samples round: each arm three times
    int arm = s.choose(1);
    s.report(1, arm, rate[arm]);
  }
  int64_t explored_before = s.explorations();
  std::vector<int> picks(3);
  const int rounds = 20000;
  for (int i = 0; i < rounds; ++i) {
    int arm = s.choose(1);
    ++picks[arm];
    s.report(1, arm, rate[arm]);
  }
  double explored = double(s.explorations() - explored_before);
  EXPECT_NEAR(explored / rounds, eps, 0.015);
  // Arm 0 is also every exploitation step's; arms 1 and 2 come from exploration alone.
  EXPECT_NEAR(picks[1] / explored, 5.0 / 16.0, 0.02);
  EXPECT_NEAR(picks[2] / explored, 1.0 / 16.0, 0.01);
  ArmSelector::Explore e;
  EXPECT_TRUE(ArmSelector::parse_explore("weighted", &e));
  EXPECT_EQ(e, ArmSelector::Explore::kWeighted);
  EXPECT_FALSE(ArmSelector::parse_explore("greedy", &e));
}

TEST(Selector, TriesEveryArmMinSamplesTimesFirst) {
  ArmSelector::Options o = selector_options({1}, 3, 0.0, 8, 0);
  o.min_samples = 3;
  ArmSelector s(o);
  std::vector<int> count(3);
  for (int i = 0; i < 9; ++i) {
    int arm = s.choose(1);
    ++count[arm];
    s.report(1, arm, arm == 0 ? 100.0 : 1.0);  // arm 0 looks best from its first sample
  }
  EXPECT_EQ(count, (std::vector<int>{3, 3, 3}));
  EXPECT_EQ(s.choose(1), 0);
}

TEST(Selector, ContextsKeepSeparateStatistics) {
  // Same batch size, two contexts with opposite best arms (as copying and drafting stretches
  // have): each context converges to its own; one shared statistic could only pick one.
  ArmSelector::Options o = selector_options({1}, 3, 0.05, 16, 7);
  o.contexts = 2;
  ArmSelector s(o);
  std::mt19937_64 noise(3);
  std::normal_distribution<double> n01(0.0, 0.3);
  std::map<int, int> picks[2];
  for (int i = 0; i < 2000; ++i) {
    int ctx = (i / 7) % 2;
    int arm = s.choose(1, ctx);
    picks[ctx][arm]++;
    double mean = ctx == 0 ? 3.0 - arm : 1.0 + arm;  // context 0: arm 0; context 1: arm 2
    s.report(1, arm, mean + n01(noise), ctx);
  }
  EXPECT_EQ(s.cell_of(1, 0), 0);
  EXPECT_EQ(s.cell_of(1, 1), 1);
  EXPECT_EQ(s.best(s.cell_of(1, 0)), 0);
  EXPECT_EQ(s.best(s.cell_of(1, 1)), 2);
  EXPECT_GT(picks[0][0], 850);
  EXPECT_GT(picks[1][2], 850);
}

TEST(Selector, MedianIgnoresOutliers) {
  ArmSelector::Options o = selector_options({1}, 2, 0.0, 5, 0);
  o.value = ArmSelector::Value::kMedianRate;
  ArmSelector s(o);
  for (double r : {1.0, 1.0, 100.0, 1.0, 1.0}) s.report(1, 0, r);
  for (double r : {2.0, 2.0, 2.0}) s.report(1, 1, r);
  EXPECT_DOUBLE_EQ(s.value(0, 0), 1.0);
  EXPECT_EQ(s.best(0), 1);
}

// Arm 0 emits 2.5 tokens every 10 ms (250 tok/s). Arm 1 drafts all or nothing in 8 ms steps:
// 9 tokens on 2 steps of 5, else 1 (mean 4.2 tokens: 525 tok/s, median 125 tok/s).
void report_steady_and_all_or_nothing(ArmSelector& s) {
  for (int i = 0; i < 20; ++i) {
    s.report_step(1, 0, 2.5, 0.010);
    s.report_step(1, 1, i % 5 < 2 ? 9.0 : 1.0, 0.008);
  }
}

TEST(Selector, ThroughputValuesAllOrNothingArmsByTheirMean) {
  ArmSelector::Options o = selector_options({1}, 2, 0.0, 20, 0);
  o.value = ArmSelector::Value::kThroughput;
  ArmSelector tput(o);
  report_steady_and_all_or_nothing(tput);
  EXPECT_NEAR(tput.value(0, 0), 250.0, 1e-9);
  EXPECT_NEAR(tput.value(0, 1), 525.0, 1e-9);
  EXPECT_EQ(tput.best(0), 1);
  // The median of per-step rates prefers the steady arm, at half the tokens/s.
  o.value = ArmSelector::Value::kMedianRate;
  ArmSelector med(o);
  report_steady_and_all_or_nothing(med);
  EXPECT_NEAR(med.value(0, 1), 125.0, 1e-9);
  EXPECT_EQ(med.best(0), 0);
}

TEST(Selector, ThroughputLeavesOutStepsSlowerThanFourTimesTheMedian) {
  ArmSelector s(selector_options({1}, 1, 0.0, 8, 0));
  for (int i = 0; i < 6; ++i) s.report_step(1, 0, 2.0, 0.010);
  s.report_step(1, 0, 2.0, 0.035);  // 3.5x the median: a real cost, counted
  EXPECT_NEAR(s.value(0, 0), 14.0 / 0.095, 1e-9);
  s.report_step(1, 0, 2.0, 1.0);  // 100x: a one-off (allocation, catch-up), left out
  EXPECT_NEAR(s.value(0, 0), 14.0 / 0.095, 1e-9);
  // Only the window's steps count: 8 kept, the first 0.010 s step has left.
  s.report_step(1, 0, 4.0, 0.010);
  EXPECT_NEAR(s.value(0, 0), 16.0 / 0.095, 1e-9);
}

// The floor under plain decoding (a reference arm): 3 arms, arm 2 plain at 100 tok/s, the
// others' rates drawn per step with the given means and a 20% spread.
std::vector<int> run_floor(ArmSelector& s, const double mean[3], int rounds, uint64_t seed) {
  std::mt19937_64 noise(seed);
  std::normal_distribution<double> spread(1.0, 0.2);
  std::vector<int> picks(3);
  for (int i = 0; i < rounds; ++i) {
    int arm = s.choose(1);
    ++picks[size_t(arm)];
    s.report_step(1, arm, mean[arm] * std::max(0.1, spread(noise)) * 0.01, 0.01);
  }
  return picks;
}

TEST(Selector, PlainFloorTriesPlainFirstAndStopsExploringArmsRuledOut) {
  const double eps = 0.1;
  ArmSelector s(floor_options({1}, 3, eps, 32, 1, /*reference=*/2));
  EXPECT_EQ(s.choose(1), 2) << "plain first";
  const double mean[3] = {50.0, 60.0, 100.0};
  std::vector<int> picks = run_floor(s, mean, 4000, 3);
  EXPECT_TRUE(s.ruled_out(0, 0));
  EXPECT_TRUE(s.ruled_out(0, 1));
  EXPECT_FALSE(s.ruled_out(0, 2));
  EXPECT_EQ(s.best(0), 2);
  // Each slower arm: a short trial round, then rechecks at eps * kRecheck / 2 of the steps.
  double slow_share = double(picks[0] + picks[1]) / 4000.0;
  std::printf("slower arms took %.4f of the steps\n", slow_share);
  EXPECT_LT(slow_share, 2.0 * eps * ArmSelector::kRecheck);
  EXPECT_GT(picks[0] + picks[1], 4) << "a known verdict is still rechecked now and then";
}

TEST(Selector, PlainFloorLeavesPlainForAClearlyFasterArm) {
  ArmSelector s(floor_options({1}, 3, 0.1, 32, 2, /*reference=*/2));
  const double mean[3] = {150.0, 60.0, 100.0};
  std::vector<int> picks = run_floor(s, mean, 2000, 4);
  EXPECT_EQ(s.best(0), 0);
  EXPECT_GT(picks[0], 1700);
}

TEST(Selector, PlainFloorKeepsPlainAgainstAnArmWithinItsNoise) {
  // Arm 0 is 2% faster on average, well within the noise of 32 steps: no reason to leave plain.
  ArmSelector s(floor_options({1}, 3, 0.1, 32, 5, /*reference=*/2));
  const double mean[3] = {102.0, 60.0, 100.0};
  std::vector<int> picks = run_floor(s, mean, 2000, 6);
  EXPECT_GT(picks[2], picks[0]);
  // Without the floor, epsilon-greedy follows whichever mean is ahead at the moment.
  ArmSelector plain(selector_options({1}, 3, 0.1, 32, 5));
  std::vector<int> greedy = run_floor(plain, mean, 2000, 6);
  std::printf("within the noise: plain chosen %d (floor) vs %d (epsilon-greedy) of 2000\n",
              picks[2], greedy[2]);
  EXPECT_GT(picks[2], greedy[2]);
}

TEST(Selector, PlainFloorKeepsExplorationWithinItsBudgetWhenNoiseHidesTheVerdict) {
  // Both other arms are 25% slower than plain, but steps vary so much (a shared machine) that
  // 32-step intervals overlap: no arm is ruled out, and epsilon-exploration alone would spend
  // about eps of the steps on arms that lose. The budget caps what exploration costs instead.
  const double eps = 0.1;
  ArmSelector s(floor_options({1}, 3, eps, 32, 7, /*reference=*/2));
  std::mt19937_64 noise(11);
  std::lognormal_distribution<double> spread(0.0, 0.8);
  const double mean[3] = {75.0, 75.0, 100.0};
  const int rounds = 6000;
  int explored = 0;
  for (int i = 0; i < rounds; ++i) {
    int arm = s.choose(1);
    if (i >= 100 && arm != 2) ++explored;  // past the trial rounds
    s.report_step(1, arm, mean[arm] * 0.01, 0.01 * spread(noise));
  }
  std::printf("explored %d of %d steps; exploration cost %.3f s of %.1f s\n", explored, rounds,
              s.exploration_cost(0), s.cell_seconds(0));
  EXPECT_GT(explored, 0) << "the verdict must still be rechecked";
  // Exploration alone: with steps this noisy, the odd window also lets a slower arm lead for a
  // while (exploited, not explored: over 20 seeds, 2-11% of steps went to slower arms in all,
  // 1.6-2.7% explored).
  EXPECT_LT(double(s.explorations()) / rounds, eps / 2) << "exploration was not held to its budget";
  EXPECT_LE(s.exploration_cost(0), 1.1 * ArmSelector::kExploreBudget * s.cell_seconds(0) + 0.1);
}

TEST(Selector, PlainCostIsLearnedPerBatchSizeAndInterpolated) {
  ArmSelector s(floor_options({1}, 2, 0.1, 32, 0, /*reference=*/1));
  EXPECT_LT(s.plain_seconds_per_token(4), 0) << "nothing measured yet";
  EXPECT_TRUE(s.needs_calibration(4));
  for (int i = 0; i < 2; ++i) {
    s.report_step(2, 1, 2.0, 0.060);  // plain: T(2) = 60 ms, T(10) = 100 ms
    s.report_step(10, 1, 10.0, 0.100);
    s.report_step(6, 0, 30.0, 0.100);  // another arm's steps say nothing about plain's cost
  }
  EXPECT_NEAR(s.plain_seconds_per_token(2), 0.030, 1e-12);
  EXPECT_NEAR(s.plain_seconds_per_token(6), 0.080 / 6, 1e-12);    // between 2 and 10
  EXPECT_NEAR(s.plain_seconds_per_token(1), 0.055, 1e-12);        // the slope, below 2
  EXPECT_NEAR(s.plain_seconds_per_token(20), 0.150 / 20, 1e-12);  // and above 10
  EXPECT_NEAR(s.plain_seconds_per_token(200), 1.050 / 200, 1e-12);
  EXPECT_TRUE(s.needs_calibration(6)) << "5..7 hold no plain steps";
  EXPECT_FALSE(s.needs_calibration(9)) << "10 is within a quarter of 9";
  EXPECT_FALSE(s.needs_calibration(2));
  EXPECT_TRUE(s.needs_calibration(3)) << "below 4, only the batch size itself counts";
  EXPECT_EQ(s.choose(6), 1) << "an uncalibrated batch size decodes plainly first";
  // Arm 0's steps at b = 6: 30 tokens in 100 ms, where plain would take 30 * 80/6 ms.
  EXPECT_NEAR(s.value(0, 0), 30 * 0.080 / 6 / 0.100, 1e-9);
  EXPECT_NEAR(s.value(0, 1), 1.0, 1e-9) << "plain against itself";
}

// Tails that shrink from 20 requests to 2, 3 steps per batch size, on hardware where plain
// decoding's tokens/s grows with the batch (memory-bound: T(b) = 50 ms + 1 ms * b). Arm 0 is
// 1.15x faster than plain at every batch size; arm 1 is 0.8x. In tokens/s the arms cannot be
// compared with plain steps taken at other batch sizes (valued so, arm 0 got 69% of the steps
// and arm 1 4%); against plain at their own, they can.
TEST(Selector, PlainFloorComparesArmsWithPlainAtTheirOwnBatchSize) {
  ArmSelector s(floor_options({1}, 3, 0.1, 32, 9, /*reference=*/2));
  std::mt19937_64 noise(4);
  std::normal_distribution<double> spread(1.0, 0.1);
  const double speedup[3] = {1.15, 0.8, 1.0};
  std::vector<int> picks(3);
  for (int tail = 0; tail < 30; ++tail) {
    for (int64_t b = 20; b >= 2; --b) {
      for (int i = 0; i < 3; ++i) {
        int arm = s.choose(b);
        if (tail > 0) ++picks[size_t(arm)];
        double plain = 0.050 + 0.001 * double(b);
        double tokens = double(b) * (arm == 2 ? 1.0 : 2.0);  // arms: 2 tokens a request
        s.report_step(b, arm, tokens, tokens / double(b) * plain / speedup[arm] * spread(noise));
      }
    }
  }
  int total = picks[0] + picks[1] + picks[2];
  std::printf("after the first tail: arm 0 %d, arm 1 %d, plain %d of %d\n", picks[0], picks[1],
              picks[2], total);
  EXPECT_NEAR(s.value(0, 0), 1.15, 0.07);
  EXPECT_NEAR(s.value(0, 2), 1.0, 0.05);
  EXPECT_EQ(s.best(0), 0);
  EXPECT_GT(picks[0], 0.9 * total);
  EXPECT_LT(picks[1], 0.02 * total);
}

// Buckets {1, 8}. Arm 0 emits 3 tokens a request, arm 1 two; a step of arm 0 costs 1 + b/8 plain
// steps (a long verify, dearer as the batch grows), arm 1's 1.5 at any batch size. After a stretch
// at batch 2, the first steps at batch 16 need only each arm's cost there: how many tokens each
// emits is known from batch 2, so the cell settles after kCostSteps trial steps per arm.
TEST(Selector, PlainFloorCarriesAcceptanceAcrossBucketsAndMeasuresCostPerBucket) {
  ArmSelector s(floor_options({1, 8}, 3, 0.0, 32, 3, /*reference=*/2));
  std::mt19937_64 noise(8);
  std::normal_distribution<double> accept(1.0, 0.2), time(1.0, 0.02);
  auto step = [&](int64_t b) {
    int arm = s.choose(b);
    double per_request = arm == 0 ? 3.0 : arm == 1 ? 2.0 : 1.0;
    double cost = arm == 0 ? 1.0 + double(b) / 8.0 : arm == 1 ? 1.5 : 1.0;
    double tokens = arm == 2 ? double(b) : std::max(1.0, double(b) * per_request * accept(noise));
    s.report_step(b, arm, tokens, (0.050 + 0.002 * double(b)) * cost * time(noise));
    return arm;
  };
  for (int i = 0; i < 200; ++i) step(2);
  EXPECT_EQ(s.best(s.cell_of(2)), 0) << "3 / 1.25 = 2.4x against arm 1's 2 / 1.5 = 1.33x";
  std::vector<int> first(3);
  for (int i = 0; i < 12; ++i) ++first[size_t(step(16))];
  std::printf("first 12 steps at batch 16: arm 0 %d, arm 1 %d, plain %d\n", first[0], first[1],
              first[2]);
  EXPECT_EQ(s.best(s.cell_of(16)), 1) << "arm 0 costs 3 plain steps at 16: 1.0x; arm 1 1.33x";
  EXPECT_NEAR(s.value(s.cell_of(16), 0), 1.0, 0.1);
  EXPECT_NEAR(s.value(s.cell_of(16), 1), 4.0 / 3.0, 0.1);
  EXPECT_LE(first[0], int(ArmSelector::kCostSteps));
  EXPECT_GE(first[1], 12 - 2 * int(ArmSelector::kCostSteps) - int(ArmSelector::kCostSteps));
}

// An arm that emits 2 tokens a request but costs 10 plain steps (0.2x): once its trials show it,
// even epsilon = 1 rechecks it only when the budget can pay for the step (0.08 s over plain;
// 1% of the cell's time grows by 0.1 ms a plain step), so the budget is never overdrawn.
TEST(Selector, PlainFloorDoesNotExploreAStepItsBudgetCannotPayFor) {
  ArmSelector s(floor_options({1}, 2, /*epsilon=*/1.0, 32, 5, /*reference=*/1));
  auto step = [&s] {
    if (s.choose(1) == 0)
      s.report_step(1, 0, 2.0, 0.100);
    else
      s.report_step(1, 1, 1.0, 0.010);
  };
  while (!s.ruled_out(0, 0)) step();  // the trials (with epsilon 1, some count as explored)
  int64_t explored = s.explorations();
  double cost = s.exploration_cost(0);
  for (int i = 0; i < 3000; ++i) {
    step();
    double budget = ArmSelector::kExploreBudget * s.cell_seconds(0);
    ASSERT_LE(s.exploration_cost(0), std::max(cost, budget) + 1e-9) << "step " << i;
  }
  EXPECT_GT(s.explorations(), explored) << "still rechecked once affordable";
}

// A rollout worker's tail as the pooling tests simulate it: bandit steps at batch sizes 4, 3, 2, 1
// in turn, in context i % 2; arm a emits accept[a] tokens a request at cost[a] plain steps of
// 10 ms, times a 10% spread. Arm 3 is plain (1 and 1). Returns the steps that drafted.
struct SimArms {
  double accept[4], cost[4];
};
int sim_tail(ArmSelector& s, const SimArms& arms, int steps, std::mt19937_64& noise) {
  std::normal_distribution<double> spread(1.0, 0.1);
  int drafted = 0;
  for (int i = 0; i < steps; ++i) {
    int64_t b = 4 - i % 4;
    int32_t context = i % 2;
    int32_t arm = s.choose(b, context);
    drafted += arm != 3;
    s.report_step(b, arm, double(b) * arms.accept[arm],
                  0.010 * arms.cost[arm] * std::max(0.5, spread(noise)), context);
  }
  return drafted;
}

ArmSelector pooling_selector(uint64_t seed, double epsilon = 0.3) {
  ArmSelector::Options o = floor_options({1, 2, 3}, 4, epsilon, 16, seed, /*reference=*/3);
  o.contexts = 2;
  return ArmSelector(o);
}

// What another selector absorbed counts exactly as if it had made those steps: a hand-made pool of
// steps, whose P(b), values, intervals, cell seconds and exploration budget are worked out here
// from the rules in selector.h (not through the selector), is absorbed by one selector and
// reported by another (report_step), and both must give those numbers.
TEST(Selector, AbsorbedStepsCountAsTheSelectorsOwn) {
  // pooling_selector: buckets {1, 2, 3} (batch 4 is bucket 2), 2 contexts, cell = bucket * 2 +
  // context; arm 3 decodes plainly. Steps {batch, arm, context, tokens, seconds, explore_cost}:
  const std::vector<ArmSelector::Observation> steps = {
      {2, 3, 0, 2.0, 0.010, 0.0},   {2, 3, 0, 2.0, 0.010, 0.0},     // plain, cell 2
      {4, 3, 1, 4.0, 0.012, 0.0},   {4, 3, 1, 4.0, 0.016, 0.0},     // plain, cell 5
      {4, 0, 0, 8.0, 0.021, 0.0},   {3, 0, 0, 9.0, 0.018, 0.0},     // arm 0, cell 4
      {2, 0, 0, 4.0, 0.012, 0.0},   {4, 0, 1, 12.0, 0.030, 0.004},  // arm 0, cells 2 and 5
      {4, 2, 0, 4.0, 0.056, 0.040}, {4, 2, 0, 4.0, 0.056, 0.0}};    // arm 2, cell 4
  ArmSelector pooled = pooling_selector(4), seen = pooling_selector(4);
  for (const ArmSelector::Observation& o : steps) {
    EXPECT_TRUE(pooled.absorb(o));
    seen.report_step(o.batch_size, o.arm, o.tokens, o.seconds, o.context);
  }
  auto sq = [](double x) { return x * x; };
  // P(b) = T(b) / b, T(b) a plain step's seconds at b: b * plain seconds / plain tokens there;
  // between measured batch sizes linear, below them extrapolated from the two nearest and kept
  // within [T(2) * b / 2, T(2)].
  const double t2 = 2 * (0.010 + 0.010) / (2.0 + 2.0), t4 = 4 * (0.012 + 0.016) / (4.0 + 4.0);
  const double t3 = t2 + (t4 - t2) * (3 - 2) / (4 - 2);
  const double t1 = std::clamp(t2 - (t4 - t2) / (4 - 2) * (2 - 1), t2 * 1 / 2, t2);
  const double plain_time[] = {0.0, t1, t2, t3, t4};  // 0.008, 0.010, 0.012, 0.014 s
  // Decomposed values: acceptance R_a = sum(tokens) / sum(b) over the arm's steps in the cell's
  // context (any bucket), cost R_c = sum(seconds) / sum(T(b)) over its steps in the cell's bucket
  // (either context); each ratio R = sum(x) / sum(y) has the error
  // sqrt(sum((x - R y)^2) / (n - 1) * n) / sum(y); value = R_a / R_c, its error
  // value * sqrt((err_a / R_a)^2 + (err_c / R_c)^2).
  struct Pair {
    double x, y;
  };
  auto ratio = [&sq](const std::vector<Pair>& pairs) {
    double x = 0, y = 0, squares = 0;
    for (const Pair& p : pairs) x += p.x, y += p.y;
    for (const Pair& p : pairs) squares += sq(p.x - x / y * p.y);
    double n = double(pairs.size());
    return std::make_pair(x / y, std::sqrt(squares / (n - 1) * n) / y);
  };
  auto [acc0, acc0_err] = ratio({{8, 4}, {9, 3}, {4, 2}});                   // 2.333, 0.339
  auto [cost0, cost0_err] = ratio({{0.021, t4}, {0.018, t3}, {0.030, t4}});  // 1.725, 0.220
  auto [acc_plain, acc_plain_err] = ratio({{2, 2}, {2, 2}});                 // 1, 0
  auto [cost_plain, cost_plain_err] = ratio({{0.012, t4}, {0.016, t4}});     // 1, 1/7
  auto [acc2, acc2_err] = ratio({{4, 4}, {4, 4}});                           // 1, 0
  auto [cost2, cost2_err] = ratio({{0.056, t4}, {0.056, t4}});               // 4, 0
  auto error = [&sq](double acc, double acc_err, double cost, double cost_err) {
    return acc / cost * std::sqrt(sq(acc_err / acc) + sq(cost_err / cost));
  };
  const int32_t cell = 4;  // batch sizes 3 and 4, context 0
  const double value0 = acc0 / cost0, error0 = error(acc0, acc0_err, cost0, cost0_err);  // 1.353
  const double plain = acc_plain / cost_plain;                                           // 1
  const double plain_error = error(acc_plain, acc_plain_err, cost_plain, cost_plain_err);
  const double value2 = acc2 / cost2, error2 = error(acc2, acc2_err, cost2, cost2_err);  // 0.25
  // Cells' seconds, and the exploration cost the steps carried (cells 4 and 5).
  const double cell_seconds[] = {
      0, 0, 0.010 + 0.010 + 0.012, 0, 0.021 + 0.018 + 0.056 + 0.056, 0.012 + 0.016 + 0.030};
  const double explore_cost[] = {0, 0, 0, 0, 0.040, 0.004};
  for (const ArmSelector* s : {&pooled, &seen}) {
    const char* who = s == &pooled ? "absorbed" : "reported";
    for (int64_t b = 1; b <= 4; ++b)
      EXPECT_NEAR(s->plain_seconds_per_token(b), plain_time[b] / double(b), 1e-15)
          << who << ": P(" << b << ")";
    EXPECT_NEAR(s->value(cell, 0), value0, 1e-12) << who;
    EXPECT_NEAR(s->standard_error(cell, 0), error0, 1e-12) << who;
    EXPECT_NEAR(s->value(cell, 3), plain, 1e-12) << who;
    EXPECT_NEAR(s->standard_error(cell, 3), plain_error, 1e-12) << who;
    EXPECT_NEAR(s->value(cell, 2), value2, 1e-12) << who;
    EXPECT_NEAR(s->standard_error(cell, 2), error2, 1e-12) << who;
    EXPECT_EQ(s->value(cell, 1), -1.0) << who << ": arm 1 has no steps";
    // Intervals value +- kZ * error: arm 2's (0.25 +- 0) lies below plain's (1 +- 0.29), so it
    // is ruled out; arm 0's (1.35 +- 0.52) overlaps plain's, so neither of those is.
    const double z = ArmSelector::kZ;
    ASSERT_GT(plain - z * plain_error, value2 + z * error2);
    ASSERT_LT(value0 - z * error0, plain + z * plain_error);
    EXPECT_TRUE(s->ruled_out(cell, 2)) << who;
    EXPECT_FALSE(s->ruled_out(cell, 0)) << who;
    EXPECT_FALSE(s->ruled_out(cell, 3)) << who;
    // Arm 0 at batch 2 (cell 2): context 0's acceptance over the cost of its one step there.
    EXPECT_NEAR(s->value(2, 0), acc0 / (0.012 / t2), 1e-12) << who;
    for (int32_t c = 0; c < 6; ++c) {
      EXPECT_NEAR(s->cell_seconds(c), cell_seconds[c], 1e-15) << who << ": cell " << c;
      EXPECT_NEAR(s->exploration_cost(c), s == &pooled ? explore_cost[c] : 0.0, 1e-15)
          << who << ": cell " << c << " (only absorbed steps carry a cost)";
    }
  }
  EXPECT_TRUE(pooled.take_observations().empty()) << "absorbed steps are not kept, nor own ones "
                                                     "unless asked";
  // The budget: cell 4 spent 0.040 s exploring, past kExploreBudget (1%) of its 0.151 s, so it
  // only exploits (the reference, which still needs trials); cell 2 spent nothing and explores
  // (epsilon 0.3).
  ASSERT_GT(explore_cost[4], ArmSelector::kExploreBudget * cell_seconds[4]);
  int explored_in_2 = 0;
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(pooled.choose(4, 0), 3) << "cell 4's budget is spent";
    explored_in_2 += pooled.choose(2, 0) != 3;
  }
  EXPECT_GT(explored_in_2, 0) << "cell 2's budget is not spent";

  // A step no selector of these arms could have made is refused and changes nothing.
  double before = pooled.cell_seconds(0), value = pooled.value(0, 0);
  EXPECT_FALSE(pooled.absorb({1, 4, 0, 1.0, 0.01, 0.0})) << "arm out of range";
  EXPECT_FALSE(pooled.absorb({1, -1, 0, 1.0, 0.01, 0.0})) << "arm out of range";
  EXPECT_FALSE(pooled.absorb({1, 0, 2, 1.0, 0.01, 0.0})) << "context out of range";
  EXPECT_FALSE(pooled.absorb({1, 0, 0, 1.0, 0.0, 0.0})) << "no time";
  EXPECT_FALSE(pooled.absorb({1, 0, 0, std::nan(""), 0.01, 0.0})) << "no tokens";
  EXPECT_FALSE(pooled.absorb({1, 0, 0, 1.0, 0.01, -1.0})) << "negative exploration cost";
  EXPECT_EQ(pooled.cell_seconds(0), before);
  EXPECT_EQ(pooled.value(0, 0), value);
}

// The steps a selector kept come out once each, as it counted them, exploration cost included.
TEST(Selector, KeptStepsComeOutOnceWithTheirExplorationCost) {
  const SimArms arms{{2.0, 1.5, 3.0, 1.0}, {1.6, 1.3, 2.5, 1.0}};
  ArmSelector a = pooling_selector(1);
  a.keep_observations(true);
  std::mt19937_64 noise(3);
  sim_tail(a, arms, 300, noise);
  std::vector<ArmSelector::Observation> oa = a.take_observations();
  ASSERT_EQ(oa.size(), 300u);
  EXPECT_TRUE(a.take_observations().empty()) << "each step is handed out once";
  double explored = 0.0;
  for (int32_t c = 0; c < 3 * 2; ++c) {
    double cost = 0.0, seconds = 0.0;
    for (const auto& o : oa)
      if (a.cell_of(o.batch_size, o.context) == c) cost += o.explore_cost, seconds += o.seconds;
    EXPECT_NEAR(a.exploration_cost(c), cost, 1e-12) << "cell " << c;
    EXPECT_NEAR(a.cell_seconds(c), seconds, 1e-12) << "cell " << c;
    explored += cost;
  }
  EXPECT_GT(explored, 0.0) << "no explored step: the kept steps would carry no exploration cost";
}

// Two workers whose bandits absorb each other's steps between rollout steps draft less on arms
// that lose (every arm slower than plain: the micro policy's case) than two that learn alone,
// and still find the arm that wins where one does.
TEST(Selector, PooledWorkersSpendLessOnTrialsThanWorkersAlone) {
  const SimArms losing{{1.2, 1.1, 1.3, 1.0}, {2.0, 1.8, 2.6, 1.0}};
  const SimArms winning{{2.4, 1.1, 1.3, 1.0}, {1.3, 1.8, 2.6, 1.0}};  // arm 0 at 1.85x
  auto run = [](const SimArms& arms, bool pool, int* best_picks) {
    ArmSelector w[2] = {pooling_selector(10, 0.1), pooling_selector(11, 0.1)};
    for (int k = 0; k < 2; ++k) {
      w[k].keep_observations(pool);
      if (pool) w[k].set_trial_offset(k);
    }
    std::mt19937_64 noise(12);
    int drafted = 0;
    for (int round = 0; round < 24; ++round) {  // rollout steps of 8 tail steps per worker
      for (ArmSelector& s : w) drafted += sim_tail(s, arms, 8, noise);
      if (!pool) continue;
      std::vector<ArmSelector::Observation> o0 = w[0].take_observations();
      std::vector<ArmSelector::Observation> o1 = w[1].take_observations();
      for (const auto& o : o1) EXPECT_TRUE(w[0].absorb(o));
      for (const auto& o : o0) EXPECT_TRUE(w[1].absorb(o));
    }
    *best_picks = 0;
    for (ArmSelector& s : w)
      for (int64_t b = 1; b <= 4; ++b) *best_picks += s.choose(b, 0) == 0;
    return drafted;
  };
  int best = 0;
  int alone = run(losing, false, &best), pooled = run(losing, true, &best);
  std::printf("losing arms: drafted %d steps pooled vs %d alone (of 384)\n", pooled, alone);
  EXPECT_LT(pooled, 0.85 * alone);  // 0.62-0.76 over 20 seeds
  int alone_best = 0, pooled_best = 0;
  int alone_w = run(winning, false, &alone_best), pooled_w = run(winning, true, &pooled_best);
  std::printf("winning arm: drafted %d pooled vs %d alone; arm 0 chosen at %d vs %d of 8\n",
              pooled_w, alone_w, pooled_best, alone_best);
  EXPECT_GE(pooled_best, 6) << "pooled bandits must still settle on the arm that wins";
}

TEST(Selector, ValueNames) {
  ArmSelector::Value v = ArmSelector::Value::kMedianRate;
  EXPECT_TRUE(ArmSelector::parse_value("throughput", &v));
  EXPECT_EQ(v, ArmSelector::Value::kThroughput);
  EXPECT_TRUE(ArmSelector::parse_value("median", &v));
  EXPECT_EQ(v, ArmSelector::Value::kMedianRate);
  EXPECT_FALSE(ArmSelector::parse_value("mean", &v));
}

}  // namespace
}  // namespace tlt::rollout
