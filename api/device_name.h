// The values of spec.model.device, parsed once: "auto", "cpu", "cuda" or "cuda:N" (N a CUDA
// ordinal among the devices this process sees, i.e. after CUDA_VISIBLE_DEVICES).
//
// The job API validates the field with it (Rule::Format::kDevice, api/validate.cc; the CRD's
// kDevicePattern matches exactly what it accepts) and the runtime resolves it to a device
// (runtime/device/device.h). Header-only and free of LibTorch, so both sides share it.
//
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>

namespace tlt::api {

struct DeviceName {
  enum class Kind { kAuto, kCpu, kCuda };
  Kind kind = Kind::kAuto;
  int index = -1;  // cuda:N: N; -1 for auto, cpu and a bare "cuda" (every visible device)

  bool operator==(const DeviceName& o) const { return kind == o.kind && index == o.index; }
  // "auto", "cpu", "cuda" or "cuda:N": parse_device_name's input again.
  std::string text() const {
    switch (kind) {
      case Kind::kAuto:
        return "auto";
      case Kind::kCpu:
        return "cpu";
      case Kind::kCuda:
        return index < 0 ? "cuda" : "cuda:" + std::to_string(index);
    }
    return "auto";
  }
};

// Parses `text`; nullopt when it is none of the forms above ("" included). N is one to four
// decimal digits without a sign ("cuda:01" is cuda:1): a node has a few dozen GPUs at most.
inline std::optional<DeviceName> parse_device_name(const std::string& text) {
  if (text == "auto") return DeviceName{DeviceName::Kind::kAuto, -1};
  if (text == "cpu") return DeviceName{DeviceName::Kind::kCpu, -1};
  if (text == "cuda") return DeviceName{DeviceName::Kind::kCuda, -1};
  const std::string prefix = "cuda:";
  if (text.size() <= prefix.size() || text.compare(0, prefix.size(), prefix) != 0)
    return std::nullopt;
  if (text.size() > prefix.size() + 4) return std::nullopt;
  int n = 0;
  for (size_t i = prefix.size(); i < text.size(); ++i) {
    char c = text[i];
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + (c - '0');
  }
  return DeviceName{DeviceName::Kind::kCuda, int(n)};
}

// The CRD's pattern: exactly what parse_device_name accepts (RE2 and std::regex read it alike).
inline constexpr const char* kDevicePattern = "^(auto|cpu|cuda(:[0-9]{1,4})?)$";

}  // namespace tlt::api
