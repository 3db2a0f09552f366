// A GPU's own busy share over an interval (tlt_gpu_busy_ratio from the device): the share of the
// interval during which one or more kernels ran on it, as the driver samples it (NVML's GPU
// utilization samples, each the busy share of the period since the previous one; NVML keeps the
// recent ones, a sample every 1/6 s to 1 s depending on the GPU).
//
// NVML is loaded at run time with dlopen("libnvidia-ml.so.1"), the driver's library, so that no
// build links it and a machine without it (every CPU machine) only has no meter.
//
// busy_share is pure arithmetic over samples; BusyMeter reads a UtilizationSource, which a test
// fakes (samples and a clock of its own).
//
// Errors: open_nvml returns NotFound when the library is absent, FailedPrecondition when it
// lacks an entry point, Unavailable when NVML does not start or has no device at the given PCI
// bus id. A meter never fails: an interval it cannot measure has no share (nullopt).
// Ownership: a BusyMeter owns its source; the NVML source keeps the library loaded until it is
// destroyed.
// Thread safety: a BusyMeter and a source belong to one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/status.h"

namespace tlt::device {

// One sample: the GPU was busy `busy` (in [0, 1]) of the period that ends at `time_us`.
struct UtilizationSample {
  uint64_t time_us = 0;  // the source's clock, microseconds
  double busy = 0;
};

// Where a meter reads a GPU's utilization.
class UtilizationSource {
 public:
  virtual ~UtilizationSource() = default;
  // The source's clock now (microseconds; the samples' time base).
  virtual uint64_t now_us() = 0;
  // The samples with time_us > after_us that the source still keeps, oldest first (empty: none).
  virtual StatusOr<std::vector<UtilizationSample>> samples_after(uint64_t after_us) = 0;
};

// The busy share of [begin_us, end_us] from `samples` (oldest first): each sample covers the
// period since the previous one (the first since `first_from_us`, the newest sample before the
// interval, or begin_us when none); a sample counts for the part of its period inside the
// interval, weighted by that part. nullopt when no sample covers any of the interval (an interval
// shorter than the sample period, or samples not yet taken).
std::optional<double> busy_share(const std::vector<UtilizationSample>& samples,
                                 uint64_t first_from_us, uint64_t begin_us, uint64_t end_us);

// Measures intervals: begin() marks the start, end() returns the busy share since then.
class BusyMeter {
 public:
  explicit BusyMeter(std::unique_ptr<UtilizationSource> source);
  void begin();
  // The GPU's busy share since begin() (nullopt: no sample covers the interval, the source
  // failed, or begin() was not called).
  std::optional<double> end();

 private:
  std::unique_ptr<UtilizationSource> source_;
  bool begun_ = false;
  uint64_t begin_us_ = 0, first_from_us_ = 0;
};

// NVML's GPU utilization samples of the device at `pci_bus_id` ("00000000:3B:00.0"), from
// `library`. NVML numbers devices regardless of CUDA_VISIBLE_DEVICES, so the device is named by
// its PCI bus id, which both agree on.
StatusOr<std::unique_ptr<UtilizationSource>> open_nvml(
    const std::string& pci_bus_id, const std::string& library = "libnvidia-ml.so.1");

// The meter of `device` ("cpu" or "cuda:K", this process's current placement): null on the CPU,
// on a CPU build, or where NVML cannot be opened; `*why` then says why (for the log).
std::unique_ptr<BusyMeter> busy_meter_for(const std::string& device, std::string* why);

}  // namespace tlt::device
