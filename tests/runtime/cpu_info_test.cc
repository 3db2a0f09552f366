// The CPU line of `tlt version` and the benches: /proc/cpuinfo's first processor, its numbers and
// the bfloat16 flags (AVX512-BF16, AMX) that decide how bfloat16 decoding runs.
#include <gtest/gtest.h>

#include "runtime/cpu_info.h"

namespace tlt::runtime {
namespace {

// Two processors of an Intel Xeon with AMX (Sapphire Rapids numbers), the second with other
// values that must not leak into the first's.
constexpr const char* kIntel =
    "processor\t: 0\n"
    "vendor_id\t: GenuineIntel\n"
    "cpu family\t: 6\n"
    "model\t\t: 167\n"
    "model name\t: Intel(R) Xeon(R) Platinum 8488C\n"
    "flags\t\t: fpu avx512f avx512_bf16 amx_bf16 amx_tile amx_int8\n"
    "\n"
    "processor\t: 1\n"
    "vendor_id\t: AuthenticAMD\n"
    "model\t\t: 17\n";

TEST(CpuInfo, ReadsTheFirstProcessorsNumbersAndBfloat16Flags) {
  CpuInfo c = parse_cpuinfo(kIntel);
  EXPECT_EQ(c.vendor, "GenuineIntel");
  EXPECT_EQ(c.model_name, "Intel(R) Xeon(R) Platinum 8488C");
  EXPECT_EQ(c.family, 6);
  EXPECT_EQ(c.model, 167);
  EXPECT_TRUE(c.avx512_bf16 && c.amx_bf16 && c.amx_tile);
  EXPECT_EQ(describe(c),
            "Intel(R) Xeon(R) Platinum 8488C (GenuineIntel family 6 model 167; avx512_bf16 yes, "
            "amx_bf16 yes, amx_tile yes)");
  // Flags are whole words: avx512_bf16x is not avx512_bf16.
  CpuInfo amd = parse_cpuinfo(
      "vendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\nflags\t\t: avx512_bf16x\n");
  EXPECT_FALSE(amd.avx512_bf16 || amd.amx_bf16);
  EXPECT_EQ(describe(parse_cpuinfo("")),
            "unknown CPU (unknown vendor; avx512_bf16 no, amx_bf16 no, amx_tile no)");
}

TEST(CpuInfo, ThisMachineHasAVendor) {
  CpuInfo c = cpu_info();
#if defined(__x86_64__) && defined(__linux__)
  EXPECT_FALSE(c.vendor.empty());
  EXPECT_GE(c.family, 0);
  EXPECT_EQ(c.avx512_bf16, __builtin_cpu_supports("avx512bf16") != 0);
#endif
  std::printf("%s\n", describe(c).c_str());
}

}  // namespace
}  // namespace tlt::runtime
