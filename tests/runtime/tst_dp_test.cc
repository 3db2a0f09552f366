// Data-parallel TST: R ranks (threads of this test in one Gloo group, meeting at a FileStore in a
// temp dir) training on shards of the same global batches take exactly the single process's
// steps: equal losses, held-out losses and weights in float64 (printed maxdiff). Uneven shards
// (B % R != 0) and -100 padding give the ranks different numbers of scored positions, so the
// global normalisation is really checked; normalising per rank (the wrong way) visibly differs.
// Shapes: B global batch rows, B_r rows of rank r, L positions, s bag size, V vocabulary.
#include <gtest/gtest.h>
#include <unistd.h>

#include <torch/csrc/distributed/c10d/FileStore.hpp>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

#include "runtime/tst/data_parallel.h"
#include "runtime/tst/superposition.h"
#include "runtime/tst/trainer.h"

namespace tlt::tst {
namespace {

model::ModelConfig cfg() {
  model::ModelConfig c;
  c.vocab = 50, c.dim = 16, c.n_layers = 2, c.n_heads = 2, c.n_kv_heads = 1, c.ffn = 32;
  c.max_seq = 64;
  return c;
}

double maxdiff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

// `world` collectives, rank r at [r], joined by threads; empty when this build has no Gloo.
std::vector<std::unique_ptr<Collective>> gloo_group(int world, int timeout_s = 60) {
  static std::atomic<int> n_groups{0};
  std::string path = (std::filesystem::temp_directory_path() /
                      ("tlt_tst_dp_" + std::to_string(getpid()) + "_" + std::to_string(n_groups++)))
                         .string();
  std::filesystem::remove(path);
  std::vector<std::unique_ptr<Collective>> group(world);
  std::vector<std::string> errors(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      auto store = c10::make_intrusive<c10d::FileStore>(path, world);
      CollectiveOptions o;
      o.rank = r, o.world = world, o.bind_host = "127.0.0.1";
      o.timeout = std::chrono::seconds(timeout_s);
      StatusOr<std::unique_ptr<Collective>> c = c10d_collective(store, o);
      if (c.ok()) {
        group[r] = std::move(*c);
      } else {
        errors[r] = c.status().message();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < world; ++r) {
    if (!group[r]) {
      std::cerr << "rank " << r << ": " << errors[r] << "\n";
      return {};
    }
  }
  return group;
}

std::vector<std::vector<int32_t>> docs(int seed) {
  std::vector<std::vector<int32_t>> d;
  std::mt19937 rng(seed);
  for (int i = 0; i < 30; ++i) {
    std::vector<int32_t> doc;
    for (int j = 0; j < 40; ++j) doc.push_back(2 + int32_t((j * 7 + i) % 40 + rng() % 3));
    doc.push_back(1);
    d.push_back(doc);
  }
  return d;
}

TrainerOptions options(int64_t batch) {
  TrainerOptions o;
  o.schedule.steps = 6, o.schedule.warmup = 2, o.schedule.decay_fraction = 0.25;
  o.schedule.peak_lr = 3e-3, o.schedule.superposition = true;
  o.schedule.ratio = 0.5, o.schedule.bag = 3;  // 3 superposition steps, then 3 recovery steps
  o.batch = batch, o.positions = 12, o.eval_batches = 3;
  o.grad_clip = 0.05;  // small enough to clip: the norm must be the global batch's
  return o;
}

// A float64 trainer; seed decides the initial weights.
std::unique_ptr<TSTTrainer> trainer(const TrainerOptions& o, uint64_t seed, Collective* group) {
  torch::manual_seed(seed);
  model::Transformer m(cfg());
  m->to(torch::kFloat64);
  return std::make_unique<TSTTrainer>(m, PackedStream(docs(4), 1), PackedStream(docs(9), 2), o,
                                      group);
}

struct Trace {
  std::vector<double> losses;  // per step, of the global batch
  double eval = 0;             // held-out loss after the last step
  torch::Tensor weights;       // (P) every parameter, flattened
  std::string error;
};

Trace train(TSTTrainer& t) {
  Trace tr;
  Status st = t.synchronise();
  if (!st.ok()) return {{}, 0, {}, st.message()};
  while (!t.finished() && t.status().ok()) tr.losses.push_back(t.step().loss);
  tr.eval = t.evaluate();
  if (!t.status().ok()) return {{}, 0, {}, t.status().message()};
  std::vector<torch::Tensor> flat;
  for (const torch::Tensor& p : t.model()->parameters()) flat.push_back(p.detach().reshape({-1}));
  tr.weights = torch::cat(flat).clone();
  return tr;
}

// The ranks' traces of a data-parallel run; rank r starts from other weights (seed 100 + r)
// than rank 0, so equal results also check that synchronise() broadcasts rank 0's.
std::vector<Trace> train_parallel(int world, const TrainerOptions& o) {
  std::vector<std::unique_ptr<Collective>> group = gloo_group(world);
  if (group.empty()) return {};
  std::vector<std::unique_ptr<TSTTrainer>> trainers;
  for (int r = 0; r < world; ++r)  // built here: the seeded global RNG is not thread-safe
    trainers.push_back(trainer(o, r == 0 ? 5 : 100 + r, group[r].get()));
  std::vector<Trace> traces(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) threads.emplace_back([&, r] { traces[r] = train(*trainers[r]); });
  for (std::thread& t : threads) t.join();
  return traces;
}

TEST(TstDataParallel, ShardRowsPartitionTheBatch) {
  torch::Tensor rows = torch::arange(7 * 2).view({7, 2});  // (B, n)
  std::vector<torch::Tensor> shards;
  for (int r = 0; r < 3; ++r) shards.push_back(shard_rows(rows, r, 3));  // (B_r, n)
  EXPECT_EQ(shards[0].size(0), 3);
  EXPECT_EQ(shards[1].size(0), 2);
  EXPECT_EQ(shards[2].size(0), 2);
  EXPECT_TRUE(torch::equal(shards[1][1], rows[4]));             // rows r, r + R, ...
  torch::Tensor all = std::get<0>(torch::cat(shards).sort(0));  // (B, n)
  EXPECT_TRUE(torch::equal(all, rows));
}

// The normalisation alone, without a group: with -100 padding that differs per row, the shards'
// loss sums divided by the global count of scored positions add up to the global mean loss, and
// their gradients to its gradient; the mean of per-shard means does not.
TEST(TstDataParallel, PaddedShardsSumToTheGlobalLossAndGradient) {
  torch::manual_seed(3);
  model::Transformer m(cfg());
  m->to(torch::kFloat64);
  const int64_t s = 3, l = 4, world = 2;
  torch::Tensor rows = torch::randint(0, 50, {4, s * l});  // (B, s*L)
  torch::Tensor labels = bag_labels(rows, s);              // (B, L, s)
  labels[0].narrow(0, 1, 2).fill_(kIgnore);                // row 0 (rank 0): 1 scored position
  labels[2][0][2] = kIgnore;                               // a partly padded bag still scores
  torch::Tensor w = bag_weights(s, "uniform", torch::kFloat64);  // (s)
  auto logits = [&](const torch::Tensor& r) {                    // (B_r, L, V)
    int64_t b = r.size(0);
    torch::Tensor pos = torch::arange(l).view({1, l}).expand({b, l});
    return m->forward_embeddings(bag_embeddings(m->embed, r, s), pos).logits;
  };
  auto grads = [&](torch::Tensor loss) {  // (P) gradient of loss
    for (torch::Tensor& p : m->parameters()) p.mutable_grad() = torch::Tensor();
    loss.backward();
    std::vector<torch::Tensor> g;
    for (const torch::Tensor& p : m->parameters()) g.push_back(p.grad().reshape({-1}).clone());
    return torch::cat(g);
  };
  torch::Tensor global = multi_hot_ce(logits(rows), labels, w);
  torch::Tensor g_global = grads(global);
  int64_t n = 0;
  std::vector<int64_t> counts;
  for (int r = 0; r < world; ++r) {
    counts.push_back(scored_positions(shard_rows(labels.view({4, -1}), r, world).view({-1, l, s})));
    n += counts.back();
  }
  ASSERT_NE(counts[0], counts[1]) << "the shards should score different numbers of positions";
  torch::Tensor right = torch::zeros({1}, torch::kFloat64), wrong = right.clone();
  torch::Tensor g_right = torch::zeros_like(g_global), g_wrong = g_right.clone();
  for (int r = 0; r < world; ++r) {
    torch::Tensor mine = shard_rows(rows, r, world);  // (B_r, s*L)
    torch::Tensor lab = shard_rows(labels.view({4, -1}), r, world).view({-1, l, s});
    torch::Tensor part = multi_hot_ce_sum(logits(mine), lab, w) / double(n);
    right += part.detach(), g_right += grads(part);
    torch::Tensor local = multi_hot_ce(logits(mine), lab, w) / double(world);
    wrong += local.detach(), g_wrong += grads(local);
  }
  double d_loss = std::abs(right.item<double>() - global.item<double>());
  double d_grad = maxdiff(g_right, g_global), d_wrong = maxdiff(g_wrong, g_global);
  std::cout << "counts " << counts[0] << "," << counts[1] << " loss maxdiff=" << d_loss
            << " grad maxdiff=" << d_grad << " local-normalisation grad maxdiff=" << d_wrong
            << "\n";
  EXPECT_LT(d_loss, 1e-12);
  EXPECT_LT(d_grad, 1e-12);
  EXPECT_GT(d_wrong, 1e-4);
  EXPECT_GT(std::abs(wrong.item<double>() - global.item<double>()), 1e-4);
}

// k steps of R ranks on uneven shards (B = 5 or 4 rows over 2 or 3 ranks) equal k steps of one
// process: per-step global-batch losses, the held-out loss, and every weight on every rank.
void expect_parallel_equals_single(int world, int64_t batch) {
  TrainerOptions o = options(batch);
  std::unique_ptr<TSTTrainer> one = trainer(o, 5, nullptr);
  std::vector<torch::Tensor> init;
  for (const torch::Tensor& p : one->model()->parameters())
    init.push_back(p.detach().reshape({-1}));
  torch::Tensor start = torch::cat(init).clone();  // (P)
  Trace ref = train(*one);
  ASSERT_TRUE(ref.error.empty()) << ref.error;
  std::vector<Trace> ranks = train_parallel(world, o);
  if (ranks.empty()) GTEST_SKIP() << "this build has no Gloo (libgloo-dev)";
  for (int r = 0; r < world; ++r) {
    const Trace& t = ranks[r];
    ASSERT_TRUE(t.error.empty()) << "rank " << r << ": " << t.error;
    ASSERT_EQ(t.losses.size(), ref.losses.size());
    double d_loss = 0;
    for (size_t i = 0; i < ref.losses.size(); ++i)
      d_loss = std::max(d_loss, std::abs(t.losses[i] - ref.losses[i]));
    double d_w = maxdiff(t.weights, ref.weights), d_eval = std::abs(t.eval - ref.eval);
    std::cout << "world " << world << " B " << batch << " rank " << r << ": loss maxdiff=" << d_loss
              << " eval maxdiff=" << d_eval << " weight maxdiff=" << d_w
              << " (training moved weights by up to " << maxdiff(ref.weights, start) << ")\n";
    EXPECT_LT(d_loss, 1e-10);
    EXPECT_LT(d_eval, 1e-10);
    EXPECT_LT(d_w, 1e-10);
    EXPECT_TRUE(torch::equal(t.weights, ranks[0].weights)) << "ranks must hold the same weights";
  }
}

TEST(TstDataParallel, TwoRanksEqualOneProcessOnUnevenShards) {
  expect_parallel_equals_single(2, 5);
}

TEST(TstDataParallel, ThreeRanksEqualOneProcessOnUnevenShards) {
  expect_parallel_equals_single(3, 4);
}

// The same run with each rank normalising by its own count: the test above would catch it.
TEST(TstDataParallel, LocalNormalisationDiffersFromOneProcess) {
  TrainerOptions o = options(5);
  Trace ref = train(*trainer(o, 5, nullptr));
  o.local_normalisation = true;
  std::vector<Trace> ranks = train_parallel(2, o);
  if (ranks.empty()) GTEST_SKIP() << "this build has no Gloo (libgloo-dev)";
  ASSERT_TRUE(ranks[0].error.empty()) << ranks[0].error;
  double d_w = maxdiff(ranks[0].weights, ref.weights);
  double d_loss = std::abs(ranks[0].losses[0] - ref.losses[0]);
  std::cout << "local normalisation: first-step loss maxdiff=" << d_loss
            << " weight maxdiff=" << d_w << "\n";
  EXPECT_GT(d_loss, 1e-6);
  EXPECT_GT(d_w, 1e-6);
}

// A rank that leaves (its process group destroyed: its connections close) fails its peer's next
// collective at once with Unavailable, and the group stays failed; nothing waits for the timeout.
TEST(TstDataParallel, ADeadPeerFailsTheCollectiveInsteadOfHanging) {
  std::vector<std::unique_ptr<Collective>> group = gloo_group(2, /*timeout_s=*/30);
  if (group.empty()) GTEST_SKIP() << "this build has no Gloo (libgloo-dev)";
  group[1].reset();
  torch::Tensor t = torch::ones({8}, torch::kFloat64);  // (8)
  auto start = std::chrono::steady_clock::now();
  Status st = group[0]->all_reduce_sum(t);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "dead peer: " << st.message() << " after " << seconds << " s\n";
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_LT(seconds, 20.0);
  EXPECT_EQ(group[0]->broadcast(t, 0).code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace tlt::tst
