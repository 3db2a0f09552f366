// The weight-sync group (runtime/rl/weight_sync.h): three ranks as threads of this test on one
// Gloo group. Publishes cut into many small buckets arrive bit-exact; a corrupted bucket and a
// stale version are refused (Corruption, counted, the module untouched) while the group stays in
// step for the next publish.
#include <gtest/gtest.h>

#include <thread>

#include "runtime/model/transformer.h"
#include "runtime/rl/weight_sync.h"

namespace tlt::rl {
namespace {

model::ModelConfig cfg() {
  model::ModelConfig c;
  c.vocab = 50, c.dim = 16, c.n_layers = 2, c.n_heads = 2, c.n_kv_heads = 1, c.ffn = 32;
  c.max_seq = 64;
  return c;
}

bool same(model::Transformer& a, model::Transformer& b) {
  std::vector<torch::Tensor> x = synced_tensors(*a), y = synced_tensors(*b);
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i)
    if (!torch::equal(x[i], y[i])) return false;
  return true;
}

TEST(WeightSync, ChecksumSeesOneByte) {
  torch::Tensor a = torch::randint(0, 256, {1003}, torch::kUInt8);  // a 3-byte tail
  torch::Tensor b = a.clone();
  EXPECT_EQ(weight_checksum(a), weight_checksum(b));
  for (int64_t i : {0, 500, 1001, 1002}) {
    b = a.clone();
    b[i] = uint8_t(b[i].item<int>() ^ 1);
    EXPECT_NE(weight_checksum(a), weight_checksum(b)) << "byte " << i;
  }
  EXPECT_NE(weight_checksum(a.narrow(0, 0, 1002)), weight_checksum(a));
}

TEST(WeightSync, BroadcastVerifiesAndRefuses) {
  torch::manual_seed(1);
  constexpr int kWorld = 3;
  std::vector<std::unique_ptr<WeightSync>> ranks(kWorld);
  WeightSyncOptions o;
  o.world = kWorld, o.bucket_bytes = 4096, o.timeout_s = 60;
  StatusOr<std::unique_ptr<WeightSync>> r0 = WeightSync::open(o);
  ASSERT_TRUE(r0.ok()) << r0.status().message();
  ranks[0] = std::move(*r0);
  o.port = ranks[0]->port();
  for (int r = 1; r < kWorld; ++r) {
    o.rank = r;
    StatusOr<std::unique_ptr<WeightSync>> s = WeightSync::open(o);
    ASSERT_TRUE(s.ok()) << s.status().message();
    ranks[size_t(r)] = std::move(*s);
  }
  std::vector<Status> joined(kWorld);
  std::vector<std::thread> ts;
  for (int r = 0; r < kWorld; ++r)
    ts.emplace_back([&, r] { joined[size_t(r)] = ranks[r]->join(); });
  for (std::thread& t : ts) t.join();
  if (joined[0].code() == StatusCode::kUnimplemented) GTEST_SKIP() << joined[0].message();
  for (const Status& s : joined) ASSERT_TRUE(s.ok()) << s.message();

  model::Transformer policy(cfg());
  std::vector<model::Transformer> workers;
  for (int r = 1; r < kWorld; ++r) workers.push_back(model::Transformer(cfg()));
  ASSERT_FALSE(same(policy, workers[0]));
  // One publish: rank 0 sends `version` (corrupting bucket `bad`), the others expect `expect`.
  auto publish = [&](int64_t version, int64_t expect, int64_t bad) {
    std::vector<Status> st(kWorld);
    std::vector<std::thread> ts;
    for (int r = 0; r < kWorld; ++r) {
      ts.emplace_back([&, r] {
        st[size_t(r)] =
            r == 0 ? ranks[0]->publish(WeightKind::kPolicy, version, synced_tensors(*policy), bad)
                   : ranks[size_t(r)]->receive(WeightKind::kPolicy, expect,
                                               synced_tensors(*workers[size_t(r) - 1]));
      });
    }
    for (std::thread& t : ts) t.join();
    return st;
  };
  int64_t buckets = 0;
  for (const torch::Tensor& t : synced_tensors(*policy)) buckets += t.numel() * t.element_size();
  ASSERT_GT(buckets / o.bucket_bytes, 4);  // several buckets, the last one shorter

  std::vector<Status> st = publish(1, 1, 3);  // bucket 3 corrupted: refused, untouched
  ASSERT_TRUE(st[0].ok()) << st[0].message();
  for (int r = 1; r < kWorld; ++r) {
    EXPECT_EQ(st[size_t(r)].code(), StatusCode::kCorruption) << st[size_t(r)].message();
    EXPECT_NE(st[size_t(r)].message().find("bucket 3 of"), std::string::npos);
    EXPECT_EQ(ranks[size_t(r)]->refused(), 1);
  }
  EXPECT_FALSE(same(policy, workers[0]));
  st = publish(2, 1, -1);  // a version the worker does not expect: refused
  for (int r = 1; r < kWorld; ++r) {
    EXPECT_EQ(st[size_t(r)].code(), StatusCode::kCorruption) << st[size_t(r)].message();
    EXPECT_EQ(ranks[size_t(r)]->refused(), 2);
  }
  EXPECT_FALSE(same(policy, workers[1]));
  st = publish(3, 3, -1);  // the group is still in step: this one arrives bit-exact
  for (const Status& s : st) EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(same(policy, workers[0]));
  EXPECT_TRUE(same(policy, workers[1]));
  EXPECT_EQ(ranks[1]->refused(), 2);
}

}  // namespace
}  // namespace tlt::rl
