// The GPU flavour on a CUDA device (compiled only with TLT_GPU; every test skips without a
// device, so the binary also runs on the CPU machines):
//  - the transformer's forward on CUDA equals the CPU's (float64, printed maxdiff), with and
//    without the KV cache;
//  - the rollout engine on CUDA, plain and speculative (chain, tree, n-gram), produces exactly
//    the CPU's greedy tokens;
//  - bfloat16 decoding: the probe runs on the device and, where it chose bfloat16, every arm
//    and a second call after a weight update stay plain decoding's;
//  - NCCL collectives (one rank per device; one rank on a one-GPU machine) sum and broadcast.
// Shapes: B batch, T time, V vocab.
#include <gtest/gtest.h>
#include <unistd.h>

#include <torch/csrc/distributed/c10d/FileStore.hpp>

#include <atomic>
#include <filesystem>
#include <random>
#include <thread>

#include "runtime/rollout/engine.h"
#include "runtime/tst/data_parallel.h"
#include "tests/runtime/requests.h"

namespace tlt {
namespace {

using model::Drafter;
using model::Transformer;

#define TLT_REQUIRE_CUDA() \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device"

model::ModelConfig small_config() {
  model::ModelConfig c;
  c.vocab = 64, c.dim = 32, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.ffn = 64;
  c.max_seq = 128;
  return c;
}

// A float64 target with peaked next-token distributions (see tests/runtime/rollout_test.cc).
Transformer make_target(uint64_t seed) {
  torch::manual_seed(seed);
  Transformer t(small_config());
  t->to(torch::kFloat64);
  torch::NoGradGuard g;
  t->lm_head->weight.mul_(30.0);
  t->eval();
  return t;
}

// A deep copy of `m` on `device` (the engine and the cache follow the weights' device).
Transformer copy_to(const Transformer& m, torch::Device device) {
  Transformer c(m->config());
  torch::NoGradGuard g;
  auto src = m->named_parameters();
  for (auto& p : c->named_parameters()) p.value().set_data(src[p.key()].detach().clone());
  c->to(device);
  c->eval();
  return c;
}

double maxdiff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.cpu() - b.cpu()).abs().max().item<double>();
}

TEST(Cuda, TransformerForwardEqualsCpu) {
  TLT_REQUIRE_CUDA();
  Transformer cpu = make_target(1);
  Transformer gpu = copy_to(cpu, torch::kCUDA);
  torch::NoGradGuard g;
  int64_t b = 3, t = 9;
  torch::Tensor toks = torch::randint(64, {b, t}, torch::kInt64);                        // (B, T)
  torch::Tensor pos = model::sequential_positions(torch::zeros({b}, torch::kInt64), t);  // (B, T)
  model::ForwardResult rc = cpu->forward(toks, pos);
  model::ForwardResult rg = gpu->forward(toks.cuda(), pos.cuda());
  double d = maxdiff(rc.logits, rg.logits);
  std::cout << "transformer forward cuda vs cpu: maxdiff " << d << "\n";
  EXPECT_LT(d, 1e-9);
  EXPECT_TRUE(rg.logits.is_cuda());

  // The same tokens through the KV cache: a prefill of 5, then 4 one-token steps.
  auto cache_c = cpu->make_cache(b, 32), cache_g = gpu->make_cache(b, 32);
  for (int64_t i = 0; i < b; ++i) cache_c->add_slot(), cache_g->add_slot();
  double worst = 0.0;
  for (int64_t start = 0; start < t;) {
    int64_t n = start == 0 ? 5 : 1;
    torch::Tensor tk = toks.narrow(1, start, n), ps = pos.narrow(1, start, n);
    torch::Tensor lc = cpu->forward(tk, ps, cache_c.get()).logits;                // (B, n, V)
    torch::Tensor lg = gpu->forward(tk.cuda(), ps.cuda(), cache_g.get()).logits;  // (B, n, V)
    worst = std::max(worst, maxdiff(lc, lg));
    for (int64_t i = 0; i < b; ++i) cache_c->commit_prefix(i, n), cache_g->commit_prefix(i, n);
    start += n;
  }
  std::cout << "cached decode cuda vs cpu: maxdiff " << worst << "\n";
  EXPECT_LT(worst, 1e-9);
}

std::vector<rollout::Completion> run(Transformer target, Drafter drafter, rollout::EngineOptions o,
                                     const std::vector<rollout::Request>& reqs) {
  auto engine = rollout::Engine::create(target, drafter, o);
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  if (!engine.ok()) return {};
  auto out = (*engine)->generate(reqs);
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  return out.ok() ? *out : std::vector<rollout::Completion>{};
}

TEST(Cuda, EngineGreedyEqualsCpuPlainEveryArm) {
  TLT_REQUIRE_CUDA();
  Transformer cpu = make_target(11);
  Transformer gpu = copy_to(cpu, torch::kCUDA);
  std::vector<rollout::Request> reqs = rollout::test_support::random_requests(40, 64, 20, 0.0, 3);
  rollout::EngineOptions plain;
  plain.max_batch = 16, plain.max_seq = 128, plain.speculative = false;
  std::vector<rollout::Completion> want = run(cpu, Drafter(nullptr), plain, reqs);
  ASSERT_EQ(want.size(), reqs.size());

  auto same = [&](const std::vector<rollout::Completion>& got, const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    int bad = 0;
    for (size_t i = 0; i < got.size(); ++i) bad += got[i].tokens != want[i].tokens;
    EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " requests differ";
  };
  same(run(gpu, Drafter(nullptr), plain, reqs), "cuda plain");
  torch::manual_seed(5);
  Drafter drafter(gpu, 1);  // untrained (its drafts are often wrong, which must not matter);
  drafter->eval();          // on the target's device, in its dtype
  for (const char* arm : {"4_1_5", "3_3_8", "ngram"}) {
    rollout::EngineOptions o = plain;
    o.speculative = true, o.activation_threshold = 1000, o.arms = {arm}, o.selector = "fixed";
    same(run(gpu, drafter, o, reqs), std::string("cuda speculative ") + arm);
  }
}

// bfloat16 decoding on the device: the engine runs the CPU's probe on CUDA and says why it
// decodes in bfloat16 or float32, naming the device. Where it chose bfloat16, every arm (CUDA
// graphs on) gives plain decoding's tokens, and after an in-place weight update a second call of
// the same engine (graphs captured over the bfloat16 copies) gives a fresh engine's tokens.
TEST(Cuda, Bfloat16DecodingIsProbedOnTheDeviceAndStaysLossless) {
  TLT_REQUIRE_CUDA();
  torch::manual_seed(21);
  Transformer target(small_config());  // float32: bfloat16 products replace float32 ones
  {
    torch::NoGradGuard g;
    target->lm_head->weight.mul_(4.0);
  }
  target->to(torch::kCUDA);
  target->eval();
  std::vector<rollout::Request> reqs = rollout::test_support::random_requests(24, 64, 20, 0.0, 5);
  rollout::EngineOptions plain;
  plain.max_batch = 8, plain.max_seq = 128, plain.speculative = false, plain.bfloat16 = true;
  auto engine = rollout::Engine::create(target, Drafter(nullptr), plain);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  auto want = (*engine)->generate(reqs);
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  const rollout::EngineStats& st = (*engine)->stats();
  std::cout << "bfloat16 decoding on cuda: " << st.precision << "\n";
  EXPECT_NE(st.precision.find("on cuda:"), std::string::npos) << st.precision;
  EXPECT_EQ(st.bfloat16, st.precision.rfind("bfloat16 products", 0) == 0) << st.precision;
  if (!st.bfloat16) return;  // float32 decoding is EngineGreedyEqualsCpuPlainEveryArm's
  torch::manual_seed(5);
  Drafter drafter(target, 1);
  drafter->eval();
  for (const char* arm : {"4_1_5", "3_3_8", "ngram"}) {
    rollout::EngineOptions o = plain;
    o.speculative = true, o.activation_threshold = 1000, o.arms = {arm}, o.selector = "fixed";
    std::vector<rollout::Completion> got = run(target, drafter, o, reqs);
    ASSERT_EQ(got.size(), want->size()) << arm;
    int bad = 0;
    for (size_t i = 0; i < got.size(); ++i) bad += got[i].tokens != (*want)[i].tokens;
    EXPECT_EQ(bad, 0) << arm << ": " << bad << " of " << got.size() << " requests differ";
  }
  {
    torch::NoGradGuard g;
    target->lm_head->weight.mul_(1.5);  // in place, as a checkpoint load or a weight sync
  }
  auto again = (*engine)->generate(reqs);
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  std::vector<rollout::Completion> fresh = run(target, Drafter(nullptr), plain, reqs);
  ASSERT_EQ(fresh.size(), again->size());
  int bad = 0, changed = 0;
  for (size_t i = 0; i < fresh.size(); ++i) {
    bad += fresh[i].tokens != (*again)[i].tokens;
    changed += fresh[i].tokens != (*want)[i].tokens;
  }
  EXPECT_EQ(bad, 0) << bad << " requests differ from a fresh engine's after the update";
  std::cout << "the update changed " << changed << " of " << fresh.size() << " responses\n";
}

// One NCCL rank per device, as threads meeting at a FileStore. NCCL cannot put two ranks on one
// device, so a one-GPU machine checks a group of one (communicator set-up and the calls).
TEST(Cuda, NcclAllReduceAndBroadcast) {
  TLT_REQUIRE_CUDA();
  int world = std::min<int>(int(torch::cuda::device_count()), 4);
  std::string path =
      (std::filesystem::temp_directory_path() / ("tlt_cuda_nccl_" + std::to_string(getpid())))
          .string();
  std::filesystem::remove(path);
  std::vector<std::string> errors(world);
  std::vector<double> sums(world), roots(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      auto store = c10::make_intrusive<c10d::FileStore>(path, world);
      tst::CollectiveOptions o;
      o.rank = r, o.world = world, o.cuda = true;
      o.timeout = std::chrono::seconds(60);
      auto c = tst::c10d_collective(store, o);
      if (!c.ok()) {
        errors[r] = c.status().to_string();
        return;
      }
      if (!(*c)->cuda()) errors[r] = "the NCCL collective says it is not CUDA";
      torch::Device dev(torch::kCUDA, r);
      torch::Tensor t =
          torch::full({1000}, double(r + 1), torch::dtype(torch::kFloat64).device(dev));
      Status s = (*c)->all_reduce_sum(t);
      if (!s.ok()) errors[r] = s.to_string();
      sums[r] = t.sum().item<double>() / 1000.0;
      torch::Tensor u = torch::full({7}, double(10 * r), torch::dtype(torch::kFloat32).device(dev));
      s = (*c)->broadcast(u, 0);
      if (!s.ok()) errors[r] = s.to_string();
      roots[r] = u.max().item<double>();
    });
  }
  for (std::thread& t : threads) t.join();
  std::filesystem::remove(path);
  double want = world * (world + 1) / 2.0;
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(errors[r], "") << "rank " << r;
    EXPECT_EQ(sums[r], want) << "rank " << r;
    EXPECT_EQ(roots[r], 0.0) << "rank " << r;
  }
  std::cout << "nccl: " << world << " rank(s), all_reduce_sum and broadcast ok\n";
}

}  // namespace
}  // namespace tlt
