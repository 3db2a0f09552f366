// Where a job computes: spec.model.device (or `tlt generate --device`) resolved against what this
// build and this machine have, and which device each process of a run takes.
//
//   auto      CUDA when the build is the GPU flavour (TLT_GPU) and a device is visible, else the
//             CPU; the reason is part of the placement ("this build has no CUDA", "no CUDA device
//             visible").
//   cpu       the CPU.
//   cuda      every visible CUDA device: a run's processes take them round-robin (process_device),
//             the trainer and TST's rank 0 the first. A pod sees the GPU its container was given
//             (the device plugin sets CUDA_VISIBLE_DEVICES), so each pod computes on that one.
//   cuda:N    device N (an ordinal among the visible ones) for every process.
// cuda and cuda:N never fall back to the CPU: without the GPU flavour, without a visible device,
// or with N out of range, resolve_device fails with a message that names the field and says
// what to do. Ordinals count the devices this process sees, so CUDA_VISIBLE_DEVICES is honoured
// (CUDA renumbers what it leaves visible from 0); the placement's line quotes it when set.
//
// resolve_device, process_device and sharing_note are pure (a fake Inventory tests them);
// probe_inventory and make_current touch the CUDA runtime (nothing on a CPU build).
//
// Thread safety: pure functions and values; probe_inventory may be called from any thread.
// make_current sets the calling thread's current CUDA device.
#pragma once

#include <string>
#include <vector>

#include "api/status.h"

namespace tlt::device {

// What this process can compute on.
struct Inventory {
  bool build_has_cuda = false;    // the GPU flavour (cmake -DTLT_GPU=ON)
  std::vector<std::string> gpus;  // names of the visible CUDA devices, by ordinal
  bool visible_env_set = false;   // CUDA_VISIBLE_DEVICES is set...
  std::string visible_env;        // ...to this ("" hides every device)
};

// This process's inventory: the build's flavour, the devices LibTorch's CUDA runtime sees and
// CUDA_VISIBLE_DEVICES. On a CPU build: no CUDA and no devices, without touching any driver.
Inventory probe_inventory();

// A job's devices, resolved.
struct Placement {
  std::string request;  // as written: "auto", "cpu", "cuda", "cuda:1"
  bool cuda = false;    // false: every process computes on the CPU
  // The CUDA devices the job's processes take, round-robin (empty on the CPU), and their names.
  std::vector<int> ordinals;
  std::vector<std::string> names;
  // Why the CPU ("this build has no CUDA", "no CUDA device visible", "spec.model.device: cpu");
  // "" on CUDA.
  std::string reason;
  std::string visible_env;  // "CUDA_VISIBLE_DEVICES=..." when it was set, else ""

  // The first process's device (the RL trainer, TST's rank 0): "cpu" or "cuda:K".
  std::string main_device() const { return process_device(0); }
  // Process `slot`'s device (slot >= 0): "cpu", or "cuda:K" with K = ordinals[slot % size].
  std::string process_device(int slot) const;
  // What `tlt run` prints at start and the report keeps, e.g.
  //   "device: cuda:0 (NVIDIA H100 80GB HBM3)"
  //   "device: cuda (2 visible GPUs: cuda:0 NVIDIA H100 80GB HBM3, cuda:1 NVIDIA H100 80GB HBM3;
  //    processes take them round-robin)"
  //   "device: cpu (this build has no CUDA)"
  std::string line() const;
  // line() without the leading "device: " (the report's value).
  std::string description() const;
};

// Resolves `request` against `inventory`. `field` names the setting in errors
// ("spec.model.device", "--device"). InvalidArgument, naming `field` and what to do, when the
// request does not parse, or asks for CUDA that the build or the machine lacks, or names an
// ordinal that is not visible. Never resolves cuda or cuda:N to the CPU.
StatusOr<Placement> resolve_device(const std::string& request, const Inventory& inventory,
                                   const std::string& field = "spec.model.device");

// "" when `processes` processes have a device each (or compute on the CPU), else one sentence
// for the log saying which share a GPU, e.g. "3 rollout workers on 2 GPUs: cuda:0 runs
// workers 0 and 2, cuda:1 runs worker 1". `what` names the processes ("rollout workers").
std::string sharing_note(const Placement& placement, int processes, const std::string& what);

// Makes `device` ("cpu" or "cuda:K") the calling thread's current CUDA device, which the CUDA
// graphs' streams and NCCL pick up. A no-op for "cpu"; Unimplemented for CUDA on a CPU build;
// InvalidArgument for a device that does not parse or is not visible.
Status make_current(const std::string& device);

}  // namespace tlt::device
