#include "runtime/torch_env.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

namespace tlt::runtime {
namespace {

TEST(TorchEnv, ConfigureThreadsSetsLibTorchAndBlis) {
  int n = configure_threads(1);
  EXPECT_EQ(n, 1);
  EXPECT_EQ(at::get_num_threads(), 1);
  ASSERT_NE(std::getenv("BLIS_NUM_THREADS"), nullptr);
  EXPECT_STREQ(std::getenv("BLIS_NUM_THREADS"), "1");
}

TEST(TorchEnv, ComputeInfoReportsVersionAndCores) {
  ComputeInfo info = compute_info();
  EXPECT_FALSE(info.torch_version.empty());
  EXPECT_GE(info.cores, 1);
  EXPECT_EQ(info.cuda_available, info.cuda_devices > 0);
}

TEST(TorchEnv, MatmulAgreesWithNaiveSum) {
  torch::manual_seed(0);
  torch::Tensor a = torch::randn({7, 5});  // (M, K)
  torch::Tensor b = torch::randn({5, 3});  // (K, N)
  torch::Tensor c = torch::matmul(a, b);   // (M, N)
  auto aa = a.accessor<float, 2>();
  auto bb = b.accessor<float, 2>();
  double maxdiff = 0;
  for (int i = 0; i < 7; ++i) {
    for (int j = 0; j < 3; ++j) {
      double s = 0;
      for (int k = 0; k < 5; ++k) s += aa[i][k] * bb[k][j];
      maxdiff = std::max(maxdiff, std::abs(s - c[i][j].item<double>()));
    }
  }
  EXPECT_LT(maxdiff, 1e-4) << "maxdiff=" << maxdiff;
}

TEST(TorchEnv, CoresFromCpuMaxRoundsQuotaUp) {
  EXPECT_EQ(cores_from_cpu_max("max 100000"), 0);  // no limit
  EXPECT_EQ(cores_from_cpu_max("200000 100000"), 2);
  EXPECT_EQ(cores_from_cpu_max("150000 100000"), 2);  // 1.5 cores: two threads, not one
  EXPECT_EQ(cores_from_cpu_max("50000 100000"), 1);
  EXPECT_EQ(cores_from_cpu_max("100000 100000"), 1);
  EXPECT_EQ(cores_from_cpu_max(""), 0);
  EXPECT_EQ(cores_from_cpu_max("12x 100000"), 0);
  EXPECT_EQ(cores_from_cpu_max("100000 0"), 0);
}

TEST(TorchEnv, UsableCoresStayWithinTheAffinityMask) {
  std::vector<int> cpus = allowed_cpus();
  ASSERT_FALSE(cpus.empty());
  EXPECT_TRUE(std::is_sorted(cpus.begin(), cpus.end()));
  int n = usable_cores();
  EXPECT_GE(n, 1);
  EXPECT_LE(n, int(cpus.size()));
  EXPECT_EQ(compute_info().cores, n);
}

}  // namespace
}  // namespace tlt::runtime
