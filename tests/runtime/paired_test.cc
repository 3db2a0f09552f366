// The paired held-out comparison (runtime/rl/paired.h): hand-computed values, the refusals, and
// the interval's coverage on simulated evaluations with a known true difference.
#include <random>

#include <gtest/gtest.h>

#include "runtime/rl/paired.h"

namespace tlt::rl {
namespace {

TEST(PairedDifference, MatchesHandComputedNormalInterval) {
  // d = {1, 0, 0, 0.5}: mean 0.375, sd^2 = 0.6875 / 3, se = sqrt(sd^2 / 4) = 0.2393568.
  StatusOr<PairedDifference> p = paired_difference({0, 0, 1, 0.5}, {1, 0, 1, 1});
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->n, 4);
  EXPECT_DOUBLE_EQ(p->before, 0.375);
  EXPECT_DOUBLE_EQ(p->after, 0.75);
  EXPECT_DOUBLE_EQ(p->mean, 0.375);
  EXPECT_NEAR(p->lo, 0.375 - 1.959964 * 0.2393568, 1e-6);
  EXPECT_NEAR(p->hi, 0.375 + 1.959964 * 0.2393568, 1e-6);
  EXPECT_FALSE(p->improved());  // the interval contains 0
}

TEST(PairedDifference, PairingRemovesTheSpreadBetweenProblems) {
  // Problems differ a lot, the change is the same on each: the unpaired spread would hide it.
  std::vector<double> before, after;
  for (int i = 0; i < 64; ++i) {
    before.push_back((i % 4) * 0.25);
    after.push_back(before.back() + (i % 2 ? 0.05 : 0.0));
  }
  StatusOr<PairedDifference> p = paired_difference(before, after);
  ASSERT_TRUE(p.ok());
  EXPECT_NEAR(p->mean, 0.025, 1e-12);
  EXPECT_GT(p->lo, 0.0);
  EXPECT_TRUE(p->improved());
}

TEST(PairedDifference, RefusesUnpairedOrTooFewProblems) {
  StatusOr<PairedDifference> p = paired_difference({0, 1, 0}, {1, 1});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("same problems"), std::string::npos);
  p = paired_difference({0.5}, {1.0});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("spec.task.heldOut"), std::string::npos);
}

TEST(PairedDifference, IntervalCovers95PercentOfSimulatedEvaluations) {
  // Each of 128 problems has its own success rate; RL adds 0.05 to it. Four Bernoulli samples
  // per problem, before and after, as the RL driver's evaluation draws them.
  std::mt19937_64 rng(12345);
  std::uniform_real_distribution<double> rate(0.0, 0.6);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const int kProblems = 128, kSamples = 4, kReps = 2000;
  int covered = 0, improved = 0;
  for (int rep = 0; rep < kReps; ++rep) {
    std::vector<double> before(kProblems), after(kProblems);
    double truth = 0.0;
    for (int i = 0; i < kProblems; ++i) {
      double r = rate(rng);
      truth += 0.05 / kProblems;
      for (int k = 0; k < kSamples; ++k) {
        before[size_t(i)] += (u(rng) < r) / double(kSamples);
        after[size_t(i)] += (u(rng) < r + 0.05) / double(kSamples);
      }
    }
    StatusOr<PairedDifference> p = paired_difference(before, after);
    ASSERT_TRUE(p.ok());
    covered += p->lo <= truth && truth <= p->hi;
    improved += p->improved();
  }
  // Binomial(2000, 0.95) has sd 0.49%: [93%, 97%] is a four-sd band.
  double coverage = double(covered) / kReps;
  std::printf("coverage %.4f, improved in %.3f of replicates\n", coverage,
              double(improved) / kReps);
  EXPECT_GT(coverage, 0.93);
  EXPECT_LT(coverage, 0.97);
}

}  // namespace
}  // namespace tlt::rl
