// runtime/device/device.h: spec.model.device resolved against fake inventories (a CPU build, a
// GPU build on a machine without devices, one and several GPUs, CUDA_VISIBLE_DEVICES), each
// process's device round-robin, and this build's own inventory.
#include "runtime/device/device.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tlt::device {
namespace {

Inventory cpu_build() {
  return Inventory{};
}
Inventory gpu_build(std::vector<std::string> gpus, const char* visible = nullptr) {
  Inventory inv;
  inv.build_has_cuda = true;
  inv.gpus = std::move(gpus);
  if (visible) inv.visible_env_set = true, inv.visible_env = visible;
  return inv;
}
const std::string kH100 = "NVIDIA H100 80GB HBM3";

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(Device, AutoOnACpuBuildIsTheCpuAndSaysWhy) {
  StatusOr<Placement> p = resolve_device("auto", cpu_build());
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_FALSE(p->cuda);
  EXPECT_EQ(p->main_device(), "cpu");
  EXPECT_EQ(p->process_device(3), "cpu");
  EXPECT_EQ(p->line(), "device: cpu (this build has no CUDA)");
}

TEST(Device, AutoWithoutAVisibleDeviceIsTheCpuAndSaysWhy) {
  StatusOr<Placement> p = resolve_device("auto", gpu_build({}, ""));
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_FALSE(p->cuda);
  EXPECT_EQ(p->line(), "device: cpu (no CUDA device visible; CUDA_VISIBLE_DEVICES=)");
}

TEST(Device, AutoTakesCudaWhenBuildAndMachineHaveIt) {
  StatusOr<Placement> p = resolve_device("auto", gpu_build({kH100}));
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_TRUE(p->cuda);
  EXPECT_EQ(p->main_device(), "cuda:0");
  EXPECT_EQ(p->line(), "device: cuda:0 (" + kH100 + ")");
}

TEST(Device, CpuIsTheCpuWhateverTheMachineHas) {
  StatusOr<Placement> p = resolve_device("cpu", gpu_build({kH100}));
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_FALSE(p->cuda);
  EXPECT_EQ(p->line(), "device: cpu (spec.model.device: cpu)");
}

// The acceptance line: cuda without CUDA fails, naming the field and what to do; never the CPU.
TEST(Device, CudaOnACpuBuildFailsNamingTheField) {
  for (const char* request : {"cuda", "cuda:0"}) {
    StatusOr<Placement> p = resolve_device(request, cpu_build());
    ASSERT_FALSE(p.ok()) << request;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
    std::string m = p.status().message();
    EXPECT_TRUE(contains(m, "spec.model.device: " + std::string(request))) << m;
    EXPECT_TRUE(contains(m, "built without CUDA")) << m;
    EXPECT_TRUE(contains(m, "-DTLT_GPU=ON")) << m;
    EXPECT_TRUE(contains(m, "auto")) << m;
  }
}

TEST(Device, CudaWithoutAVisibleDeviceFailsNamingTheField) {
  StatusOr<Placement> p = resolve_device("cuda", gpu_build({}, "none"));
  ASSERT_FALSE(p.ok());
  std::string m = p.status().message();
  EXPECT_TRUE(contains(m, "spec.model.device: cuda: no CUDA device is visible")) << m;
  EXPECT_TRUE(contains(m, "CUDA_VISIBLE_DEVICES=none")) << m;
  EXPECT_TRUE(contains(m, "nvidia.com/gpu")) << m;
}

TEST(Device, AnOrdinalOutOfRangeFailsAndListsTheVisibleOnes) {
  StatusOr<Placement> p = resolve_device("cuda:2", gpu_build({kH100, kH100}, "4,5"));
  ASSERT_FALSE(p.ok());
  std::string m = p.status().message();
  EXPECT_TRUE(contains(m, "spec.model.device: cuda:2: only 2 CUDA devices are visible")) << m;
  EXPECT_TRUE(contains(m, "cuda:0 to cuda:1")) << m;
  EXPECT_TRUE(contains(m, "CUDA_VISIBLE_DEVICES=4,5")) << m;
}

TEST(Device, AnUnknownNameFailsNamingTheFieldGiven) {
  StatusOr<Placement> p = resolve_device("gpu", gpu_build({kH100}), "--device");
  ASSERT_FALSE(p.ok());
  EXPECT_TRUE(contains(p.status().message(), "--device: \"gpu\" is not a device"))
      << p.status().message();
}

TEST(Device, CudaNPutsEveryProcessOnDeviceN) {
  StatusOr<Placement> p = resolve_device("cuda:1", gpu_build({"A", "B", "C"}));
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->ordinals, std::vector<int>{1});
  for (int slot = 0; slot < 5; ++slot) EXPECT_EQ(p->process_device(slot), "cuda:1");
  EXPECT_EQ(p->line(), "device: cuda:1 (B)");
  EXPECT_EQ(sharing_note(*p, 1, "rollout workers"), "");
  EXPECT_EQ(sharing_note(*p, 2, "rollout workers"),
            "2 rollout workers on 1 GPU, so they share: cuda:1 runs rollout workers 0 and 1");
}

// One GPU per process, round-robin over the visible devices; more processes than GPUs share, and
// the note says which.
TEST(Device, ProcessesTakeTheVisibleGpusRoundRobin) {
  StatusOr<Placement> p = resolve_device("cuda", gpu_build({"A", "B"}, "2,3"));
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->ordinals, (std::vector<int>{0, 1}));
  std::vector<std::string> got;
  for (int slot = 0; slot < 5; ++slot) got.push_back(p->process_device(slot));
  EXPECT_EQ(got, (std::vector<std::string>{"cuda:0", "cuda:1", "cuda:0", "cuda:1", "cuda:0"}));
  EXPECT_EQ(p->main_device(), "cuda:0");
  EXPECT_EQ(p->line(),
            "device: cuda (2 visible GPUs: cuda:0 A, cuda:1 B; processes take them round-robin; "
            "CUDA_VISIBLE_DEVICES=2,3)");
  EXPECT_EQ(sharing_note(*p, 2, "rollout workers"), "") << "one GPU each";
  EXPECT_EQ(sharing_note(*p, 3, "rollout workers"),
            "3 rollout workers on 2 GPUs, so they share: cuda:0 runs rollout workers 0 and 2, "
            "cuda:1 runs rollout worker 1");
  EXPECT_EQ(sharing_note(*p, 5, "ranks"),
            "5 ranks on 2 GPUs, so they share: cuda:0 runs ranks 0, 2 and 4, cuda:1 runs ranks 1 "
            "and 3");
}

TEST(Device, TheCpuSharesNothing) {
  StatusOr<Placement> p = resolve_device("auto", cpu_build());
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(sharing_note(*p, 8, "rollout workers"), "");
}

// This binary's own inventory: a CPU build sees no CUDA; a GPU build's names match its count.
TEST(Device, ThisBuildsInventory) {
  Inventory inv = probe_inventory();
#ifdef TLT_GPU
  EXPECT_TRUE(inv.build_has_cuda);
#else
  EXPECT_FALSE(inv.build_has_cuda);
  EXPECT_TRUE(inv.gpus.empty());
  StatusOr<Placement> p = resolve_device("auto", inv);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->main_device(), "cpu");
  EXPECT_FALSE(resolve_device("cuda", inv).ok());
  EXPECT_EQ(make_current("cuda:0").code(), StatusCode::kUnimplemented);
#endif
  EXPECT_TRUE(make_current("cpu").ok());
  EXPECT_EQ(make_current("gpu").code(), StatusCode::kInvalidArgument);
  std::printf("inventory: CUDA build %d, %zu visible device(s)\n", int(inv.build_has_cuda),
              inv.gpus.size());
}

}  // namespace
}  // namespace tlt::device
