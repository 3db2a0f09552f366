#include "runtime/device/busy.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "api/device_name.h"

#ifdef TLT_GPU
#include <ATen/cuda/CUDAContext.h>
#include <torch/cuda.h>
#endif

namespace tlt::device {

std::optional<double> busy_share(const std::vector<UtilizationSample>& samples,
                                 uint64_t first_from_us, uint64_t begin_us, uint64_t end_us) {
  double busy = 0, covered = 0;
  uint64_t from = std::min(first_from_us, begin_us);
  for (const UtilizationSample& s : samples) {
    if (s.time_us <= from) continue;  // out of order or before the interval's first period
    uint64_t lo = std::max(from, begin_us), hi = std::min(s.time_us, end_us);
    if (hi > lo) {
      double part = double(hi - lo);
      busy += part * std::clamp(s.busy, 0.0, 1.0);
      covered += part;
    }
    from = s.time_us;
    if (from >= end_us) break;  // later samples cover time past the interval only
  }
  if (covered <= 0) return std::nullopt;
  return busy / covered;
}

BusyMeter::BusyMeter(std::unique_ptr<UtilizationSource> source) : source_(std::move(source)) {}

void BusyMeter::begin() {
  begin_us_ = source_->now_us();
  first_from_us_ = begin_us_;
  // The newest sample before the interval: the first sample after it covers the time since.
  StatusOr<std::vector<UtilizationSample>> before = source_->samples_after(0);
  if (before.ok() && !before->empty()) first_from_us_ = std::min(before->back().time_us, begin_us_);
  begun_ = true;
}

std::optional<double> BusyMeter::end() {
  if (!begun_) return std::nullopt;
  begun_ = false;
  uint64_t end_us = source_->now_us();
  StatusOr<std::vector<UtilizationSample>> s = source_->samples_after(first_from_us_);
  if (!s.ok()) return std::nullopt;
  return busy_share(*s, first_from_us_, begin_us_, end_us);
}

namespace {

// NVML's C interface, as far as it is used here (nvml.h: nvmlReturn_t and the enums are ints,
// a device an opaque pointer, a sample a 64-bit timestamp and an 8-byte value union).
using NvmlDevice = void*;
union NvmlValue {
  double d;
  unsigned int ui;
  unsigned long ul;
  unsigned long long ull;
  long long sll;
  int si;
};
struct NvmlSample {
  unsigned long long time_stamp;
  NvmlValue value;
};
constexpr int kNvmlSuccess = 0;
constexpr int kNvmlNotFound = 6;
constexpr int kNvmlGpuUtilizationSamples = 1;  // nvmlSamplingType_t

double sample_value(int type, const NvmlValue& v) {
  switch (type) {
    case 0:
      return v.d;  // NVML_VALUE_TYPE_DOUBLE
    case 1:
      return double(v.ui);  // UNSIGNED_INT (GPU utilization: percent)
    case 2:
      return double(v.ul);  // UNSIGNED_LONG
    case 3:
      return double(v.ull);  // UNSIGNED_LONG_LONG
    case 4:
      return double(v.sll);  // SIGNED_LONG_LONG
    case 5:
      return double(v.si);  // SIGNED_INT
    default:
      return -1;  // a type this reader does not know: the sample is left out
  }
}

class NvmlSource : public UtilizationSource {
 public:
  using Init = int (*)();
  using Shutdown = int (*)();
  using HandleByBusId = int (*)(const char*, NvmlDevice*);
  using GetSamples = int (*)(NvmlDevice, int, unsigned long long, int*, unsigned int*, NvmlSample*);

  NvmlSource(void* lib, Shutdown shutdown, GetSamples get, NvmlDevice dev)
      : lib_(lib), shutdown_(shutdown), get_(get), dev_(dev) {}
  ~NvmlSource() override {
    shutdown_();
    dlclose(lib_);
  }

  uint64_t now_us() override {  // NVML stamps samples with the host's wall clock
    return uint64_t(std::chrono::duration_cast<std::chrono::microseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count());
  }

  StatusOr<std::vector<UtilizationSample>> samples_after(uint64_t after_us) override {
    int type = 0;
    unsigned int count = 0;
    int rc = get_(dev_, kNvmlGpuUtilizationSamples, after_us, &type, &count, nullptr);
    if (rc == kNvmlNotFound) return std::vector<UtilizationSample>{};
    if (rc != kNvmlSuccess) return Status::Unavailable(error("nvmlDeviceGetSamples", rc));
    std::vector<NvmlSample> raw(count);
    rc = get_(dev_, kNvmlGpuUtilizationSamples, after_us, &type, &count, raw.data());
    if (rc == kNvmlNotFound) return std::vector<UtilizationSample>{};
    if (rc != kNvmlSuccess) return Status::Unavailable(error("nvmlDeviceGetSamples", rc));
    raw.resize(std::min<size_t>(count, raw.size()));
    std::vector<UtilizationSample> out;
    for (const NvmlSample& s : raw) {
      double percent = sample_value(type, s.value);
      if (percent >= 0 && s.time_stamp > after_us) out.push_back({s.time_stamp, percent / 100.0});
    }
    std::sort(out.begin(), out.end(), [](const UtilizationSample& a, const UtilizationSample& b) {
      return a.time_us < b.time_us;
    });
    return out;
  }

  static std::string error(const char* call, int rc) {
    return std::string("NVML: ") + call + " returned " + std::to_string(rc);
  }

 private:
  void* lib_;
  Shutdown shutdown_;
  GetSamples get_;
  NvmlDevice dev_;
};

}  // namespace

StatusOr<std::unique_ptr<UtilizationSource>> open_nvml(const std::string& pci_bus_id,
                                                       const std::string& library) {
  void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    return Status::NotFound(library +
                            " is not loadable (no NVIDIA driver here): " + std::string(dlerror()));
  auto init = reinterpret_cast<NvmlSource::Init>(dlsym(lib, "nvmlInit_v2"));
  auto shutdown = reinterpret_cast<NvmlSource::Shutdown>(dlsym(lib, "nvmlShutdown"));
  auto by_bus =
      reinterpret_cast<NvmlSource::HandleByBusId>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
  auto get = reinterpret_cast<NvmlSource::GetSamples>(dlsym(lib, "nvmlDeviceGetSamples"));
  if (!init || !shutdown || !by_bus || !get) {
    dlclose(lib);
    return Status::FailedPrecondition(
        library +
        " lacks NVML's entry points (nvmlInit_v2, nvmlShutdown, "
        "nvmlDeviceGetHandleByPciBusId_v2, nvmlDeviceGetSamples): not the driver's NVML");
  }
  int rc = init();
  if (rc != kNvmlSuccess) {
    dlclose(lib);
    return Status::Unavailable(NvmlSource::error("nvmlInit_v2", rc));
  }
  NvmlDevice dev = nullptr;
  rc = by_bus(pci_bus_id.c_str(), &dev);
  if (rc != kNvmlSuccess) {
    shutdown();
    dlclose(lib);
    return Status::Unavailable(NvmlSource::error("nvmlDeviceGetHandleByPciBusId_v2", rc) +
                               " for PCI bus id \"" + pci_bus_id + "\"");
  }
  return std::unique_ptr<UtilizationSource>(new NvmlSource(lib, shutdown, get, dev));
}

std::unique_ptr<BusyMeter> busy_meter_for(const std::string& device, std::string* why) {
  std::optional<api::DeviceName> name = api::parse_device_name(device);
  if (!name || name->kind != api::DeviceName::Kind::kCuda || name->index < 0) {
    *why = "computes on the CPU: busy time is the worker's own clock";
    return nullptr;
  }
#ifdef TLT_GPU
  if (name->index >= int(torch::cuda::device_count())) {
    *why = device + " is not visible";
    return nullptr;
  }
  const cudaDeviceProp* p = at::cuda::getDeviceProperties(name->index);
  char bus[32];
  std::snprintf(bus, sizeof bus, "%08X:%02X:%02X.0", unsigned(p->pciDomainID),
                unsigned(p->pciBusID), unsigned(p->pciDeviceID));
  StatusOr<std::unique_ptr<UtilizationSource>> s = open_nvml(bus);
  if (!s.ok()) {
    *why = s.status().message() + ": busy time is the worker's own clock";
    return nullptr;
  }
  *why = "";
  return std::make_unique<BusyMeter>(std::move(*s));
#else
  *why = "this build has no CUDA: busy time is the worker's own clock";
  return nullptr;
#endif
}

}  // namespace tlt::device
