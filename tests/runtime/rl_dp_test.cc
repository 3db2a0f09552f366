// The policy update over a group of trainer ranks (runtime/rl/policy_trainer.h, data parallel with
// ZeRO-1; runtime/rl/trainer_shards.h): rank 0 is this test's thread, rank 1 a thread running
// serve(), meeting at a FileStore in a temp dir over Gloo. In float64 only summation order
// separates two ranks from one: the same loss, KL, clip fraction and weights; each rank holds
// about half the AdamW state; the ranks' weights are bitwise equal; a checkpoint written at 2
// ranks resumes at 1 and the other way; a rank whose weights drift fails the next update naming
// the ranks; a rank that leaves fails rank 0's next collective instead of hanging it.
// Shapes: B rows, G rows per group.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

#include "runtime/model/config.h"
#include "runtime/rl/policy_trainer.h"
#include "runtime/rl/text.h"
#include "runtime/rl/trainer_shards.h"
#include "runtime/tst/group.h"
#include "tests/runtime/rl_fixtures.h"

namespace tlt::rl {
namespace {

using test::micro_policy64;

model::Transformer frozen(model::Transformer m) {
  for (auto& p : m->parameters()) p.set_requires_grad(false);
  m->eval();
  return m;
}

// `groups` GRPO groups of 8 samples: a prompt of 18-23 tokens, one long answer per group.
SequenceBatch grouped_batch(int64_t groups, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<int64_t>> prompts, responses;
  for (int64_t g = 0; g < groups; ++g) {
    std::vector<int64_t> pr;
    for (int64_t j = 0, p = 18 + int64_t(rng() % 6); j < p; ++j)
      pr.push_back(32 + int64_t(rng() % 90));
    for (int64_t i = 0; i < 8; ++i) {
      int64_t r = i == g % 8 ? 40 + int64_t(rng() % 31) : 1 + int64_t(rng() % 12);
      std::vector<int64_t> re;
      for (int64_t j = 0; j < r; ++j) re.push_back(32 + int64_t(rng() % 90));
      prompts.push_back(pr), responses.push_back(re);
    }
  }
  return make_batch(prompts, responses);
}

GrpoOptions options() {
  GrpoOptions o;
  o.learning_rate = 1e-2, o.minibatches = 2, o.kl_coef = 0.1, o.max_tokens_per_microbatch = 160;
  o.group_size = 8, o.checksum_every = 1;
  return o;
}

// `world` groups at one fresh file store, joined; empty (after a failure) when this build has
// no Gloo.
std::vector<std::unique_ptr<tst::DataParallelGroup>> file_groups(int world, int timeout_s = 30) {
  static std::atomic<int> n{0};
  std::string path = (std::filesystem::temp_directory_path() /
                      ("tlt_rl_dp_" + std::to_string(getpid()) + "_" + std::to_string(n++)))
                         .string();
  std::filesystem::remove(path);
  std::vector<std::unique_ptr<tst::DataParallelGroup>> groups(static_cast<size_t>(world));
  std::vector<Status> joined(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      tst::GroupOptions o;
      o.rank = r, o.world = world, o.store_file = path, o.timeout_s = timeout_s;
      auto g = tst::DataParallelGroup::open(o);
      if (!g.ok()) {
        joined[size_t(r)] = g.status();
        return;
      }
      joined[size_t(r)] = (*g)->join();
      groups[size_t(r)] = std::move(*g);
    });
  }
  for (std::thread& t : threads) t.join();
  for (const Status& s : joined) {
    if (!s.ok()) {
      ADD_FAILURE() << s.to_string();
      return {};
    }
  }
  return groups;
}

// Two trainer ranks: `lead` (rank 0) driven by the test, rank 1 serving in a thread with its own
// (differently initialised) models until finish().
struct TwoRanks {
  std::vector<std::unique_ptr<tst::DataParallelGroup>> groups;
  model::Transformer other{nullptr};
  std::unique_ptr<PolicyTrainer> lead;
  std::thread serving;
  Status served;

  TwoRanks(model::Transformer policy, model::Transformer reference, const GrpoOptions& o)
      : groups(file_groups(2)) {
    if (groups.empty()) return;
    other = micro_policy64(101);
    serving = std::thread([this, o] {
      PolicyTrainer t(other, frozen(micro_policy64(102)), o, groups[1].get());
      served = t.serve(60);
    });
    lead = std::make_unique<PolicyTrainer>(policy, reference, o, groups[0].get());
    EXPECT_TRUE(lead->synchronise().ok());
  }
  Status finish() {
    EXPECT_TRUE(lead->finish().ok());
    serving.join();
    return served;
  }
  ~TwoRanks() {
    if (serving.joinable()) serving.join();
  }
};

double maxdiff(model::Transformer& a, model::Transformer& b) {
  double d = 0.0;
  auto pb = b->named_parameters();
  for (const auto& p : a->named_parameters())
    d = std::max(d, (p.value() - pb[p.key()]).abs().max().item<double>());
  return d;
}

bool bitwise_equal(model::Transformer& a, model::Transformer& b) {
  auto pb = b->named_parameters();
  for (const auto& p : a->named_parameters())
    if (!torch::equal(p.value(), pb[p.key()])) return false;
  return true;
}

TEST(RlDataParallel, RankRowsKeepGroupsWholeAndPartitionTheRows) {
  SequenceBatch b = grouped_batch(5, 3);        // B = 40
  for (int64_t g : {int64_t(8), int64_t(0)}) {  // told, or found by the prompts
    for (int world : {2, 3}) {
      for (auto [lo, hi] : {std::pair<int64_t, int64_t>{0, 40}, {4, 37}}) {
        int64_t next = lo;
        for (int r = 0; r < world; ++r) {
          auto [first, last] = rank_rows(b, lo, hi, g, r, world);
          EXPECT_EQ(first, next) << "rank " << r;
          EXPECT_LE(first, last);
          if (first > lo) {
            EXPECT_EQ(first % 8, 0) << "rank " << r << " starts inside a group";
          }
          next = last;
        }
        EXPECT_EQ(next, hi);
      }
    }
  }
  auto [a0, a1] = rank_rows(b, 0, 40, 8, 0, 2);
  EXPECT_EQ(a0, 0);
  EXPECT_EQ(a1, 16) << "5 groups over 2 ranks: 2 and 3";
}

TEST(RlDataParallel, PartitionBalancesWholeTensorsByElements) {
  std::vector<torch::Tensor> t{torch::zeros({100}), torch::zeros({60}), torch::zeros({50}),
                               torch::zeros({10})};
  EXPECT_EQ(partition_by_numel(t, 2), (std::vector<int>{0, 1, 1, 0}));
  EXPECT_EQ(partition_by_numel(t, 1), (std::vector<int>{0, 0, 0, 0}));
}

TEST(RlDataParallel, TwoRanksUpdateAsOneRankDoesWithHalfTheOptimizerState) {
  GrpoOptions o = options();
  SequenceBatch b = grouped_batch(5, 11);  // 40 rows: a minibatch of 20 rows cuts group 3
  torch::manual_seed(12);
  torch::Tensor adv = torch::randn({40}, torch::kFloat64);  // (B,)
  model::Transformer alone = micro_policy64(8), ranked = micro_policy64(8);
  PolicyTrainer single(alone, frozen(micro_policy64(9)), o);
  TwoRanks two(ranked, frozen(micro_policy64(9)), o);
  ASSERT_TRUE(two.lead);
  double clipped = 0.0;
  for (int step = 0; step < 2; ++step) {
    UpdateStats a = single.update(b, adv), c = two.lead->update(b, adv);
    ASSERT_TRUE(c.status.ok()) << c.status.to_string();
    std::printf("step %d: loss %.12f vs %.12f, kl %.3e vs %.3e, clip %.4f vs %.4f\n", step, a.loss,
                c.loss, a.kl, c.kl, a.clip_fraction, c.clip_fraction);
    EXPECT_NEAR(a.loss, c.loss, 1e-11);
    EXPECT_NEAR(a.kl, c.kl, 1e-12);
    EXPECT_NEAR(a.clip_fraction, c.clip_fraction, 1e-12);
    EXPECT_EQ(a.positions, c.positions) << "whole groups: the same shared prefixes run";
    clipped += a.clip_fraction;
    ASSERT_EQ(c.rank_optimizer_bytes.size(), 2u);
    ASSERT_EQ(a.rank_optimizer_bytes.size(), 1u);
    const int64_t whole = a.rank_optimizer_bytes[0];
    std::printf("optimizer bytes: 1 rank %lld, 2 ranks %lld + %lld; peak RSS %lld, %lld\n",
                (long long)whole, (long long)c.rank_optimizer_bytes[0],
                (long long)c.rank_optimizer_bytes[1], (long long)c.rank_peak_rss_bytes[0],
                (long long)c.rank_peak_rss_bytes[1]);
    EXPECT_EQ(c.rank_optimizer_bytes[0] + c.rank_optimizer_bytes[1], whole);
    for (int64_t bytes : c.rank_optimizer_bytes) EXPECT_LT(bytes, whole * 6 / 10);
    EXPECT_GT(c.rank_peak_rss_bytes[1], 0);
  }
  EXPECT_GT(clipped, 0.0) << "the test should exercise the clipped branch";
  ASSERT_TRUE(two.finish().ok()) << two.served.to_string();
  double d = maxdiff(alone, ranked);
  std::printf("weights after two updates: 1 rank vs 2 ranks maxdiff %.3e\n", d);
  EXPECT_LT(d, 1e-10);
  EXPECT_GT(
      (alone->lm_head->weight - micro_policy64(8)->lm_head->weight).abs().max().item<double>(),
      1e-3);
  EXPECT_TRUE(bitwise_equal(ranked, two.other)) << "rank 1's weights differ from rank 0's";
}

TEST(RlDataParallel, CheckpointWrittenAtTwoRanksResumesAtOneAndBack) {
  GrpoOptions o = options();
  SequenceBatch b = grouped_batch(4, 5);
  torch::manual_seed(13);
  torch::Tensor adv = torch::randn({32}, torch::kFloat64);  // (B,)
  model::Transformer straight = micro_policy64(8);
  {
    PolicyTrainer t(straight, frozen(micro_policy64(9)), o);
    for (int i = 0; i < 3; ++i) t.update(b, adv);
  }
  const std::string dir = ::testing::TempDir() + "/rl_dp_ckpt_" + std::to_string(getpid());
  model::Transformer resumed = micro_policy64(8);
  {  // update 1 at 2 ranks
    TwoRanks two(resumed, frozen(micro_policy64(9)), o);
    ASSERT_TRUE(two.lead);
    ASSERT_TRUE(two.lead->update(b, adv).status.ok());
    ASSERT_TRUE(two.lead->save(dir + "/a", "step 1").ok());
    ASSERT_TRUE(two.finish().ok()) << two.served.to_string();
  }
  {  // update 2 at 1 rank
    model::Transformer one = micro_policy64(30);
    PolicyTrainer t(one, frozen(micro_policy64(9)), o);
    StatusOr<std::string> meta = t.load(dir + "/a");
    ASSERT_TRUE(meta.ok()) << meta.status().to_string();
    EXPECT_EQ(*meta, "step 1");
    t.update(b, adv);
    ASSERT_TRUE(t.save(dir + "/b", "step 2").ok());
  }
  {  // update 3 at 2 ranks again
    model::Transformer last = micro_policy64(31);
    TwoRanks two(last, frozen(micro_policy64(9)), o);
    ASSERT_TRUE(two.lead);
    StatusOr<std::string> meta = two.lead->load(dir + "/b");
    ASSERT_TRUE(meta.ok()) << meta.status().to_string();
    ASSERT_TRUE(two.lead->update(b, adv).status.ok());
    ASSERT_TRUE(two.finish().ok()) << two.served.to_string();
    double d = maxdiff(straight, last);
    std::printf("3 updates at 2, 1, 2 ranks through checkpoints vs 3 at 1 rank: maxdiff %.3e\n", d);
    EXPECT_LT(d, 1e-10);
    EXPECT_TRUE(bitwise_equal(last, two.other));
  }
  std::filesystem::remove_all(dir);
}

TEST(RlDataParallel, RanksWhoseWeightsDifferFailTheNextUpdateNamingThem) {
  GrpoOptions o = options();
  SequenceBatch b = grouped_batch(2, 5);
  torch::Tensor adv = torch::randn({16}, torch::kFloat64);  // (B,)
  TwoRanks two(micro_policy64(8), frozen(micro_policy64(9)), o);
  ASSERT_TRUE(two.lead);
  ASSERT_TRUE(two.lead->update(b, adv).status.ok());
  {  // rank 1 waits for its next command: nothing reads its weights meanwhile
    torch::NoGradGuard g;
    two.other->lm_head->weight.view(-1)[0].add_(1e-6);
  }
  UpdateStats st = two.lead->update(b, adv);
  ASSERT_FALSE(st.status.ok());
  EXPECT_NE(st.status.message().find("trainer ranks 0 and 1 hold different policy parameters"),
            std::string::npos)
      << st.status.message();
  two.serving.join();
  EXPECT_FALSE(two.served.ok()) << "rank 1 should see the mismatch too";
}

TEST(RlDataParallel, ARankThatLeavesFailsRankZerosNextCollective) {
  std::vector<std::unique_ptr<tst::DataParallelGroup>> groups = file_groups(2, 10);
  ASSERT_EQ(groups.size(), 2u);
  model::Transformer policy = micro_policy64(8);
  PolicyTrainer lead(policy, frozen(micro_policy64(9)), options(), groups[0].get());
  groups[1].reset();  // rank 1's process ends: its connections close
  auto start = std::chrono::steady_clock::now();
  // The update's first receive (the gradients' sum) cannot complete.
  Status st = lead.update(grouped_batch(2, 5), torch::randn({16}, torch::kFloat64)).status;
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("rank 0's update failed after %.1f s: %s\n", s, st.message().c_str());
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_LT(s, 20.0) << "within the group's timeout (10 s)";
}

}  // namespace
}  // namespace tlt::rl
