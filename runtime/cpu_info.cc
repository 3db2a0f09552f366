#include "runtime/cpu_info.h"

#include <fstream>
#include <sstream>

namespace tlt::runtime {

namespace {

// " value" after "key\t: " on a /proc/cpuinfo line, trimmed; false when the line has another key.
bool field(const std::string& line, const std::string& key, std::string* value) {
  size_t colon = line.find(':');
  if (colon == std::string::npos) return false;
  std::string k = line.substr(0, colon);
  while (!k.empty() && (k.back() == ' ' || k.back() == '\t')) k.pop_back();
  if (k != key) return false;
  size_t start = line.find_first_not_of(" \t", colon + 1);
  *value = start == std::string::npos ? "" : line.substr(start);
  return true;
}

bool has_flag(const std::string& flags, const std::string& flag) {
  std::istringstream in(flags);
  for (std::string f; in >> f;)
    if (f == flag) return true;
  return false;
}

int to_int(const std::string& s) {
  try {
    return std::stoi(s);
  } catch (const std::exception&) {
    return -1;
  }
}

}  // namespace

CpuInfo parse_cpuinfo(const std::string& text) {
  CpuInfo cpu;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() && !cpu.vendor.empty()) break;  // the first processor's block ends
    std::string v;
    if (field(line, "vendor_id", &v)) {
      cpu.vendor = v;
    } else if (field(line, "model name", &v)) {
      cpu.model_name = v;
    } else if (field(line, "cpu family", &v)) {
      cpu.family = to_int(v);
    } else if (field(line, "model", &v)) {
      cpu.model = to_int(v);
    } else if (field(line, "flags", &v)) {
      cpu.avx512_bf16 = has_flag(v, "avx512_bf16");
      cpu.amx_bf16 = has_flag(v, "amx_bf16");
      cpu.amx_tile = has_flag(v, "amx_tile");
    }
  }
  return cpu;
}

CpuInfo cpu_info() {
  std::ifstream in("/proc/cpuinfo");
  if (!in) return CpuInfo();
  std::stringstream text;
  text << in.rdbuf();
  return parse_cpuinfo(text.str());
}

std::string describe(const CpuInfo& cpu) {
  auto yes = [](bool b) { return b ? "yes" : "no"; };
  std::string numbers = cpu.family < 0 ? "" : " family " + std::to_string(cpu.family);
  if (cpu.model >= 0) numbers += " model " + std::to_string(cpu.model);
  return (cpu.model_name.empty() ? std::string("unknown CPU") : cpu.model_name) + " (" +
         (cpu.vendor.empty() ? std::string("unknown vendor") : cpu.vendor) + numbers +
         "; avx512_bf16 " + yes(cpu.avx512_bf16) + ", amx_bf16 " + yes(cpu.amx_bf16) +
         ", amx_tile " + yes(cpu.amx_tile) + ")";
}

}  // namespace tlt::runtime
