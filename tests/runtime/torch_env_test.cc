#include "runtime/torch_env.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

namespace tlt::runtime {
namespace {

// A 16 MB block touched, freed and allocated again: after keep_freed_memory() the second one reuses
// the first's pages; with glibc's defaults both are mapped afresh (16 MB is above its starting
// mmap threshold) and every page is zeroed again by a page fault.
TEST(TorchEnv, FreedMemoryIsReusedWithoutPageFaults) {
  if (std::getenv("MALLOC_TRIM_THRESHOLD_") || std::getenv("MALLOC_MMAP_THRESHOLD_"))
    GTEST_SKIP() << "the malloc policy was set by the environment";
  EXPECT_TRUE(keep_freed_memory());
  constexpr size_t kBytes = size_t(16) << 20, kPage = 4096;
  static char* volatile block = nullptr;  // the pointer escapes: malloc and free stay
  auto touch = [&] {
    block = static_cast<char*>(std::malloc(kBytes));
    ASSERT_NE(block, nullptr);
    for (size_t i = 0; i < kBytes; i += kPage) block[i] = 1;
    std::free(block);
  };
  auto faults = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return long(u.ru_minflt);
  };
  touch();
  long before = faults();
  touch();
  long again = faults() - before;
  std::printf("page faults touching the block again: %ld of %zu pages\n", again, kBytes / kPage);
  EXPECT_LT(again, long(kBytes / kPage / 10));
}

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
