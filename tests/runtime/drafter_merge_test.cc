// The drafter merge (runtime/rl/drafter_merge.h): the parts the trainers hand back are averaged
// weighted by their steps; a worker's file that is not a drafter checkpoint, is missing, or holds
// a weight that is not finite is left out and named in the log, and the others are averaged over
// their own steps.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "runtime/model/checkpoint.h"
#include "runtime/model/drafter.h"
#include "runtime/rl/drafter_merge.h"

namespace tlt::rl {
namespace {

namespace fs = std::filesystem;

model::ModelConfig tiny() {
  model::ModelConfig c;
  c.vocab = 40, c.dim = 16, c.n_layers = 1, c.n_heads = 2, c.n_kv_heads = 1, c.ffn = 32;
  c.max_seq = 32;
  return c;
}

TEST(DrafterMerge, UnsoundPartsAreLeftOutAndTheRestAveragedOverTheirSteps) {
  torch::manual_seed(5);
  char tmpl[] = "/tmp/tlt-drafter-merge-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  model::Transformer policy(tiny());
  auto part = [&](const std::string& name, float nan_at_first) {
    model::Drafter d(policy, 1);
    if (std::isnan(nan_at_first)) {
      torch::NoGradGuard no_grad;
      d->parameters()[0].view({-1})[0] = nan_at_first;
    }
    const std::string path = dir + "/" + name;
    EXPECT_TRUE(model::save_checkpoint(*d, path, "part", io::Sync::kNone).ok());
    return std::make_pair(path, d);
  };
  auto [a, da] = part("a.ckpt", 0.f);
  auto [b, db] = part("b.ckpt", 0.f);
  auto [poisoned, dp] = part("nan.ckpt", std::nanf(""));
  const std::string garbage = dir + "/garbage.ckpt";
  std::ofstream(garbage) << "not a checkpoint";
  const std::string missing = dir + "/missing.ckpt";

  model::Drafter merged(policy, 1);
  std::vector<std::string> logs;
  StatusOr<int64_t> n = merge_drafter_parts(
      merged, policy, 1, {{a, 1}, {poisoned, 5}, {b, 3}, {garbage, 2}, {missing, 1}},
      [&](const std::string& m) { logs.push_back(m); });
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(*n, 2);
  double maxdiff = 0;
  auto pa = da->parameters(), pb = db->parameters(), pm = merged->parameters();
  for (size_t i = 0; i < pm.size(); ++i) {
    torch::Tensor expected = pa[i] * 0.25 + pb[i] * 0.75;
    maxdiff = std::max(maxdiff, (pm[i] - expected).abs().max().item<double>());
  }
  std::printf("maxdiff %.3g\n", maxdiff);
  EXPECT_LT(maxdiff, 1e-6);
  std::string all;
  for (const std::string& l : logs) all += l + "\n";
  EXPECT_NE(all.find(poisoned + ": a weight is not finite"), std::string::npos) << all;
  EXPECT_NE(all.find(garbage), std::string::npos) << all;
  EXPECT_NE(all.find(missing), std::string::npos) << all;
  EXPECT_EQ(logs.size(), 3u) << all;

  model::Drafter untouched(policy, 1);
  torch::Tensor before = untouched->parameters()[0].clone();
  n = merge_drafter_parts(untouched, policy, 1, {{garbage, 4}}, nullptr);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0);
  EXPECT_TRUE(torch::equal(before, untouched->parameters()[0]));
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace tlt::rl
