#include "runtime/torch_env.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>

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

}  // namespace
}  // namespace tlt::runtime
