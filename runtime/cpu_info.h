// Which CPU runs this process, as figures and bug reports name it: the vendor, family and model
// numbers, the marketing name, and the flags that decide bfloat16 decoding (AVX512-BF16, AMX).
// Row-invariance of bfloat16 products is measured per machine (runtime/model/bfloat16_probe.h),
// so every figure that depends on it says which CPU gave it (`tlt version`, bench_rollout).
//
// Thread safety: functions; cpu_info() reads /proc/cpuinfo on every call.
#pragma once

#include <string>

namespace tlt::runtime {

struct CpuInfo {
  std::string vendor;      // vendor_id: "GenuineIntel", "AuthenticAMD"; "" where unknown
  std::string model_name;  // "model name", e.g. "AMD EPYC 9R14 96-Core Processor"
  int family = -1;         // "cpu family"; -1 where unknown
  int model = -1;          // "model"; -1 where unknown
  bool avx512_bf16 = false;
  bool amx_bf16 = false;
  bool amx_tile = false;
};

// The first processor of a /proc/cpuinfo text (x86 Linux's keys; other texts leave fields
// unknown).
CpuInfo parse_cpuinfo(const std::string& text);

// This machine's (parse_cpuinfo of /proc/cpuinfo; all unknown where it cannot be read).
CpuInfo cpu_info();

// One line: "AMD EPYC 9R14 96-Core Processor (AuthenticAMD family 25 model 17; avx512_bf16 yes,
// amx_bf16 no, amx_tile no)"; "unknown CPU (...)" where the name is unknown.
std::string describe(const CpuInfo& cpu);

}  // namespace tlt::runtime
