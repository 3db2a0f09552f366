#include "runtime/device/device.h"

#include <cstdlib>
#include <map>

#include "api/device_name.h"

#ifdef TLT_GPU
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAFunctions.h>
#include <torch/cuda.h>
#endif

namespace tlt::device {
namespace {

// What to do when CUDA was asked for and cannot be had.
constexpr const char* kOrCpu = "or set it to auto (the CPU when there is no GPU) or cpu";

std::string visible_text(const Inventory& inv) {
  return inv.visible_env_set ? "CUDA_VISIBLE_DEVICES=" + inv.visible_env : "";
}

// "workers 0 and 2", "worker 1", "workers 0, 2 and 4".
std::string slots_text(const std::vector<int>& slots, const std::string& what) {
  std::string noun = what.empty() ? "process" : what;
  if (slots.size() > 1 && noun.back() != 's') noun += "s";
  if (slots.size() == 1 && noun.back() == 's') noun.pop_back();
  std::string s = noun + " ";
  for (size_t i = 0; i < slots.size(); ++i) {
    if (i > 0) s += i + 1 == slots.size() ? " and " : ", ";
    s += std::to_string(slots[i]);
  }
  return s;
}

}  // namespace

Inventory probe_inventory() {
  Inventory inv;
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) {
    inv.visible_env_set = true;
    inv.visible_env = v;
  }
#ifdef TLT_GPU
  inv.build_has_cuda = true;
  if (torch::cuda::is_available()) {
    int n = int(torch::cuda::device_count());
    for (int i = 0; i < n; ++i) inv.gpus.push_back(at::cuda::getDeviceProperties(i)->name);
  }
#endif
  return inv;
}

std::string Placement::process_device(int slot) const {
  if (!cuda || ordinals.empty()) return "cpu";
  int k = ordinals[size_t(slot < 0 ? 0 : slot) % ordinals.size()];
  return "cuda:" + std::to_string(k);
}

std::string Placement::description() const {
  std::string env = visible_env.empty() ? "" : "; " + visible_env;
  if (!cuda) return "cpu (" + reason + env + ")";
  if (ordinals.size() == 1) return main_device() + " (" + names[0] + env + ")";
  std::string list;
  for (size_t i = 0; i < ordinals.size(); ++i)
    list += (i ? ", " : "") + process_device(int(i)) + " " + names[i];
  return "cuda (" + std::to_string(ordinals.size()) + " visible GPUs: " + list +
         "; processes take them round-robin" + env + ")";
}

std::string Placement::line() const {
  return "device: " + description();
}

StatusOr<Placement> resolve_device(const std::string& request, const Inventory& inv,
                                   const std::string& field) {
  std::optional<api::DeviceName> name = api::parse_device_name(request);
  if (!name) {
    return Status::InvalidArgument(field + ": \"" + request +
                                   "\" is not a device: give auto, cpu, cuda or cuda:N");
  }
  Placement p;
  p.request = request;
  p.visible_env = visible_text(inv);
  using Kind = api::DeviceName::Kind;
  if (name->kind == Kind::kCpu) {
    p.reason = field + ": cpu";
    return p;
  }
  if (name->kind == Kind::kAuto && (!inv.build_has_cuda || inv.gpus.empty())) {
    p.reason = inv.build_has_cuda ? "no CUDA device visible" : "this build has no CUDA";
    return p;
  }
  if (!inv.build_has_cuda) {
    return Status::InvalidArgument(
        field + ": " + request +
        ": this tlt is the CPU flavour, built without CUDA; run the GPU flavour (cmake "
        "-DTLT_GPU=ON against a CUDA LibTorch, or the image of docker/runtime-cuda.Dockerfile), " +
        kOrCpu);
  }
  if (inv.gpus.empty()) {
    std::string env = inv.visible_env_set ? " (" + visible_text(inv) + ")" : "";
    return Status::InvalidArgument(
        field + ": " + request + ": no CUDA device is visible to this process" + env +
        ": run it where a GPU is (a pod: resources.limits nvidia.com/gpu), check the NVIDIA "
        "driver (nvidia-smi), " +
        kOrCpu);
  }
  p.cuda = true;
  int n = int(inv.gpus.size());
  if (name->index >= n) {
    return Status::InvalidArgument(
        field + ": " + request + ": only " + std::to_string(n) + " CUDA device" +
        (n == 1 ? " is" : "s are") + " visible (cuda:0" +
        (n > 1 ? " to cuda:" + std::to_string(n - 1) : "") + ")" +
        (inv.visible_env_set ? "; ordinals count " + visible_text(inv) : "") +
        ": name one of them, or give cuda to use them all");
  }
  for (int i = 0; i < n; ++i) {
    if (name->index >= 0 && i != name->index) continue;
    p.ordinals.push_back(i);
    p.names.push_back(inv.gpus[size_t(i)]);
  }
  return p;
}

std::string sharing_note(const Placement& p, int processes, const std::string& what) {
  if (!p.cuda || processes <= int(p.ordinals.size())) return "";
  std::map<std::string, std::vector<int>> by_device;
  std::vector<std::string> order;
  for (int i = 0; i < processes; ++i) {
    std::string d = p.process_device(i);
    if (by_device[d].empty()) order.push_back(d);
    by_device[d].push_back(i);
  }
  int gpus = int(order.size());
  std::string s = std::to_string(processes) + " " + what + " on " + std::to_string(gpus) +
                  (gpus == 1 ? " GPU" : " GPUs") + ", so they share: ";
  for (size_t i = 0; i < order.size(); ++i)
    s += (i ? ", " : "") + order[i] + " runs " + slots_text(by_device[order[i]], what);
  return s;
}

Status make_current(const std::string& device) {
  if (device == "cpu") return Status::Ok();
  std::optional<api::DeviceName> name = api::parse_device_name(device);
  if (!name || name->kind != api::DeviceName::Kind::kCuda || name->index < 0)
    return Status::InvalidArgument("\"" + device + "\" is not a device (cpu or cuda:K)");
#ifdef TLT_GPU
  if (name->index >= int(torch::cuda::device_count()))
    return Status::InvalidArgument(device + " is not visible to this process");
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(name->index));
  return Status::Ok();
#else
  return Status::Unimplemented(device + ": this tlt is the CPU flavour, built without CUDA");
#endif
}

}  // namespace tlt::device
