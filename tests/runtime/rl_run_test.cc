// Unit tests of the RL runner's pieces: batches, the supervised warm start, the GRPO policy
// update, the drafter's spot training on a fixed buffer, the driver<->worker channel, and the
// step report's engine phases in its JSON, the job report and the metrics.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <thread>

#include "runtime/drafter/trainer.h"
#include "runtime/model/config.h"
#include "runtime/report/job_report.h"
#include "runtime/rl/channel.h"
#include "runtime/rl/policy_trainer.h"
#include "runtime/rl/run_metrics.h"
#include "runtime/rl/sequences.h"
#include "runtime/rl/text.h"
#include "runtime/rl/warm_start.h"
#include "tests/runtime/rl_fixtures.h"

namespace tlt::rl {
namespace {

using namespace test;

std::unique_ptr<Task> arithmetic_task() {
  StatusOr<std::unique_ptr<Task>> made = make_task("arithmetic-cot", 3);
  if (!made.ok()) {
    ADD_FAILURE() << made.status().to_string();
    return nullptr;
  }
  return std::move(*made);
}

TEST(RlText, RoundTripsAsciiAndStopsAtEndOfText) {
  std::vector<int64_t> ids = encode_text("7 + 5 = 12");
  EXPECT_EQ(decode_text(ids), "7 + 5 = 12");
  ids.push_back(kEndOfText);
  ids.push_back('9');
  EXPECT_EQ(decode_text(ids), "7 + 5 = 12");
  EXPECT_EQ(encode_text("\xc3\xa9")[0], int64_t('?'));  // non-ASCII bytes are '?'
}

TEST(RlSequences, MaskCoversExactlyTheResponseTargets) {
  SequenceBatch b = make_batch({{1, 2, 3}, {4}}, {{5, 6}, {7, 8, 9}});
  // Row 0: tokens 1 2 3 5 6 -> targets 2 3 5 6; the response targets are 5 and 6.
  ASSERT_EQ(b.tokens.size(1), 5);
  std::vector<float> m0(b.mask[0].data_ptr<float>(), b.mask[0].data_ptr<float>() + 4);
  EXPECT_EQ(m0, (std::vector<float>{0, 0, 1, 1}));
  // Row 1: tokens 4 7 8 9 pad -> targets 7 8 9 pad; response targets 7 8 9.
  std::vector<float> m1(b.mask[1].data_ptr<float>(), b.mask[1].data_ptr<float>() + 4);
  EXPECT_EQ(m1, (std::vector<float>{1, 1, 1, 0}));
  EXPECT_EQ(b.targets[1][0].item<int64_t>(), 7);
  EXPECT_EQ(b.response_tokens, 5);
}

// Rows of very different lengths, as a GRPO step's long tail makes them: prompts of 2-6 tokens,
// responses of 1-12 tokens, every sixth 60-90. Seeded.

TEST(RlSequences, MicroBatchPlanSortsByLengthWithinTheTokenBudget) {
  SequenceBatch b = make_batch({{1, 2, 3}, {4}, {5, 6}, {7}, {8}},
                               {{9}, {10, 11, 12, 13, 14, 15}, {16, 17}, {}, {18, 19, 20}});
  EXPECT_EQ(row_lengths(b), (std::vector<int64_t>{4, 7, 4, 2, 4}));
  // Rows 1..4 (lengths 7, 4, 2, 4) with 8 tokens a micro-batch: {1} alone (2*7 > 8), then
  // {2, 4} (the ties in row order, 2*4 <= 8), then {3}.
  std::vector<MicroBatch> plan = plan_microbatches(b, 1, 5, 8);
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(plan[0].rows, (std::vector<int64_t>{1}));
  EXPECT_EQ(plan[0].t, 7);
  EXPECT_EQ(plan[1].rows, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(plan[1].t, 4);
  EXPECT_EQ(plan[2].rows, (std::vector<int64_t>{3}));
  EXPECT_EQ(plan[2].t, 2);
  // Budget 0: the unsplit layout, rows in order, padded to the batch's T.
  std::vector<MicroBatch> one = plan_microbatches(b, 1, 5, 0);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].rows, (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(one[0].t, 7);
  // A micro-batch is its rows' prefix: the same tokens, targets and mask, cut to t.
  SequenceBatch g = gather_rows(b, plan[1]);
  ASSERT_EQ(g.tokens.sizes(), (std::vector<int64_t>{2, 4}));
  EXPECT_TRUE(torch::equal(g.tokens[1], b.tokens[4].narrow(0, 0, 4)));
  EXPECT_TRUE(torch::equal(g.mask[0], b.mask[2].narrow(0, 0, 3)));
  EXPECT_EQ(g.response_tokens, 5);
  // A long-tailed batch: every row exactly once, longest first, b * t within the budget.
  SequenceBatch lt = long_tailed_batch(48, 3);
  std::vector<int64_t> len = row_lengths(lt), seen;
  for (const MicroBatch& mb : plan_microbatches(lt, 0, 48, 200)) {
    EXPECT_TRUE(int64_t(mb.rows.size()) * mb.t <= 200 || mb.rows.size() == 1u);
    for (int64_t r : mb.rows) {
      EXPECT_LE(len[r], mb.t);
      if (!seen.empty()) {
        EXPECT_LE(len[r], len[seen.back()]);
      }
      seen.push_back(r);
    }
  }
  std::sort(seen.begin(), seen.end());
  for (int64_t i = 0; i < 48; ++i) ASSERT_EQ(seen[i], i);
}

// With share_prompts, rows of one prompt are planned apart from other prompts' rows, longest
// first, marked with their shared prefix q, a micro-batch running rows * (t - q) positions of its
// own at most; rows whose prompt is short or has no sibling, or that have no response, are
// planned as without sharing.
TEST(RlSequences, MicroBatchPlanKeepsAGroupsSamplesTogether) {
  SequenceBatch b = grouped_batch(3, 7);
  std::vector<int64_t> len = row_lengths(b);
  std::vector<MicroBatch> plan = plan_microbatches(b, 0, 24, 160, true);
  std::vector<int64_t> seen;
  // Each group's prompt less its last token: what all 8 of its samples share.
  std::vector<int64_t> prompt_q;
  for (int64_t g = 0; g < 3; ++g) {
    MicroBatch all;
    for (int64_t r = 8 * g; r < 8 * g + 8; ++r)
      all.rows.push_back(r), all.t = std::max(all.t, len[r]);
    prompt_q.push_back(shared_prefix_length(gather_rows(b, all)));
  }
  for (const MicroBatch& mb : plan) {
    SequenceBatch g = gather_rows(b, mb);
    if (mb.group < 0) {
      EXPECT_EQ(g.response_tokens, 0) << "only rows without a response leave their group";
    } else {
      int64_t group = mb.rows.front() / 8, q = prompt_q[size_t(group)];
      EXPECT_EQ(mb.shared, q) << "the group's prompt less its last token";
      EXPECT_GE(q, kMinSharedPrefix);
      EXPECT_TRUE(mb.rows.size() == 1u || int64_t(mb.rows.size()) * (mb.t - q) <= 160);
      for (int64_t r : mb.rows)
        EXPECT_EQ(r / 8, group) << "a micro-batch holds one group's samples";
    }
    for (size_t i = 0; i < mb.rows.size(); ++i) {
      EXPECT_LE(len[mb.rows[i]], mb.t);
      if (i > 0) {
        EXPECT_LE(len[mb.rows[i]], len[mb.rows[i - 1]]);
      }
      seen.push_back(mb.rows[i]);
    }
  }
  std::sort(seen.begin(), seen.end());
  ASSERT_EQ(seen.size(), 24u);
  for (int64_t i = 0; i < 24; ++i) ASSERT_EQ(seen[i], i);
  // Without sharing, the same rows mix groups (sorted by length alone).
  bool mixed = false;
  for (const MicroBatch& mb : plan_microbatches(b, 0, 24, 160, false))
    for (int64_t r : mb.rows) mixed = mixed || r / 8 != mb.rows.front() / 8;
  EXPECT_TRUE(mixed);
  // Short prompts are never planned apart: the long-tailed batch's plan is the same either way.
  SequenceBatch lt = long_tailed_batch(48, 3);
  std::vector<MicroBatch> a = plan_microbatches(lt, 0, 48, 200, false),
                          c = plan_microbatches(lt, 0, 48, 200, true);
  ASSERT_EQ(a.size(), c.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].rows, c[i].rows);
}

TEST(RlWarmStart, SupervisedLossFalls) {
  model::Transformer policy = micro_policy(1);
  std::unique_ptr<Task> task = arithmetic_task();
  WarmStartOptions o;
  o.steps = 1, o.batch = 8;
  double first = supervised_warm_start(policy, *task, o).value();
  model::Transformer again = micro_policy(1);
  o.steps = 40;
  double later = supervised_warm_start(again, *task, o).value();
  EXPECT_LT(later, first * 0.7) << "40 steps should cut the loss well below one step's";
}

TEST(RlWarmStart, UnmarkedShareIsKeptAndDependsOnTheSeed) {
  for (double share : {0.0, 0.25, 0.5, 1.0}) {
    int unmarked = 0, same_as_seed_1 = 0;
    const int n = 20000;
    for (uint64_t i = 0; i < uint64_t(n); ++i) {
      bool u = unmarked_in_warm_start(0, i, share);
      unmarked += u;
      same_as_seed_1 += u == unmarked_in_warm_start(1, i, share);
      EXPECT_EQ(u, unmarked_in_warm_start(0, i, share)) << "the same problems on every run";
    }
    EXPECT_NEAR(double(unmarked) / n, share, 0.02) << share;  // binomial sd <= 0.0036
    if (share > 0 && share < 1) {  // independent picks agree on share^2 + (1 - share)^2 of them
      EXPECT_NEAR(double(same_as_seed_1) / n, share * share + (1 - share) * (1 - share), 0.02);
    }
  }
}

// A warm start of `steps` steps of `policy` on long and short rows, as one padded batch
// (`max_tokens` 0) or in micro-batches of at most `max_tokens` tokens: each step's loss; the
// gradients of the last step (clipped) stay on the parameters.
std::vector<double> warm_start_steps(model::Transformer policy, const Task& task, int64_t steps,
                                     int64_t max_tokens) {
  WarmStartOptions o;
  o.steps = steps, o.batch = 8, o.max_prompt_chars = 1000;  // long and short rows in one batch
  o.max_tokens_per_microbatch = max_tokens;
  std::vector<double> losses;
  EXPECT_TRUE(
      supervised_warm_start(policy, task, o, [&](int64_t, double l) { losses.push_back(l); }).ok());
  return losses;
}

// ||a - b|| / ||b|| over all parameters' gradients.
double relative_gradient_difference(model::Transformer a, model::Transformer b) {
  double diff = 0.0, norm = 0.0;
  auto pa = a->parameters(), pb = b->parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_EQ(pa[i].grad().defined(), pb[i].grad().defined()) << "parameter " << i;
    if (!pa[i].grad().defined() || !pb[i].grad().defined()) continue;
    torch::Tensor ga = pa[i].grad().to(torch::kFloat64), gb = pb[i].grad().to(torch::kFloat64);
    diff += (ga - gb).pow(2).sum().item<double>();
    norm += gb.pow(2).sum().item<double>();
  }
  return std::sqrt(diff / norm);
}

// Micro-batches only reorder the padded batch's sums: every solution token's term is divided by
// the batch's token count n either way, so the loss and the gradient are the same up to rounding.
// Bounds from the arithmetic, whatever CPU and kernels sum them: reordering a sum of N terms
// moves it by at most (N - 1) u sum|terms|, u the unit roundoff. The longest sums here are over
// the batch's positions (at most 8 rows x (prompt + 96) < 1024) and, inside the products, over
// the feed-forward width (384): N < 2048. Loss terms are positive (sum|terms| = n x loss), and a
// gradient's terms are taken to cancel no more than 4-fold (norm-wise) on top of that: relative
// differences below 2 x 4 x 2048 u, 1e-3 in float32 and 2e-12 in float64, far below what a wrong
// normaliser or a lost micro-batch makes (10% and more).
// Parameters after AdamW steps are compared in float64 only: AdamW divides by sqrt(v) + eps, so a
// parameter whose gradient g is near eps moves by about lr x sign(g) and a gradient difference
// d changes its update by up to lr x d / eps. In float32 the last-bit differences of one CPU's
// kernels against another's can move such a parameter by up to lr (3.4e-3); in float64
// d < 2e-12 x ||g|| (||g|| <= 1 after clipping) moves an update by at most
// 3.4e-3 x 2e-12 / 1e-8 < 1e-6 per step.
TEST(RlWarmStart, MicroBatchedStepsMatchOnePaddedBatch) {
  std::unique_ptr<Task> task = arithmetic_task();
  constexpr double kTerms = 2048, kCancel = 4;
  const double u32 = std::ldexp(1.0, -24), u64 = std::ldexp(1.0, -53);
  // float32, the step jobs run, from the same weights: loss and gradient.
  model::Transformer padded = micro_policy(1), split = micro_policy(1);
  double l_padded = warm_start_steps(padded, *task, 1, 0).at(0);
  double l_split = warm_start_steps(split, *task, 1, 96).at(0);  // several micro-batches
  double grad32 = relative_gradient_difference(split, padded);
  std::printf("float32: loss %.9g vs %.9g, gradients differ by %.3g relative\n", l_split, l_padded,
              grad32);
  EXPECT_LE(std::abs(l_split - l_padded), 2 * kTerms * u32 * l_padded);
  EXPECT_LE(grad32, 2 * kCancel * kTerms * u32);
  // float64, three steps: the first loss and every parameter after the last step.
  model::Transformer padded64 = micro_policy64(1), split64 = micro_policy64(1);
  std::vector<double> l_padded64 = warm_start_steps(padded64, *task, 3, 0);
  std::vector<double> l_split64 = warm_start_steps(split64, *task, 3, 96);
  ASSERT_EQ(l_padded64.size(), 3u);
  ASSERT_EQ(l_split64.size(), 3u);
  EXPECT_LE(std::abs(l_split64[0] - l_padded64[0]), 2 * kTerms * u64 * l_padded64[0]);
  double max_moved = 0.0;
  auto a = padded64->parameters(), b = split64->parameters();
  ASSERT_EQ(a.size(), b.size());
  const double lr_max = 1e-3 / 0.3, eps = 1e-8;  // the first step's warm-up rate; AdamW's eps
  const double per_step = lr_max * 2 * kCancel * kTerms * u64 / eps;
  for (size_t i = 0; i < a.size(); ++i) {
    double moved = (a[i] - b[i]).abs().max().item<double>();
    max_moved = std::max(max_moved, moved);
    EXPECT_LE(moved, 3 * per_step) << "parameter " << i;
  }
  std::printf(
      "float64: first loss %.17g vs %.17g, parameters differ by at most %.3g (bound %.3g)\n",
      l_split64[0], l_padded64[0], max_moved, 3 * per_step);
}

// Share of solution positions of unseen (held-out) problems where the drafter's top token is
// the policy's own top next token: what greedy speculation accepts per drafted token.
double drafter_agreement(model::Transformer& policy, model::Drafter& drafter, const Task& task) {
  torch::NoGradGuard g;
  std::vector<std::vector<int64_t>> prompts, responses;
  for (uint64_t i = 0; i < 16; ++i) {
    Problem p = task.problem(i, /*held_out=*/true);
    prompts.push_back(encode_text(p.prompt));
    responses.push_back(encode_text(p.solution));
  }
  SequenceBatch batch = make_batch(prompts, responses);
  int64_t b = batch.tokens.size(0), t = batch.tokens.size(1);
  torch::Tensor pos = torch::arange(t).unsqueeze(0).expand({b, t});
  model::ForwardResult out = policy->forward(batch.tokens, pos);  // hidden (B, T, C)
  // Pair j = (h_j, x_{j+1}) predicts h_{j+1}, whose top token is the policy's guess of x_{j+2}.
  torch::Tensor pred = drafter->forward(batch.tokens.narrow(1, 1, t - 1),
                                        out.hidden.narrow(1, 0, t - 1), pos.narrow(1, 0, t - 1));
  torch::Tensor guess = drafter->logits(pred).argmax(-1);          // (B, T-1)
  torch::Tensor want = out.logits.narrow(1, 1, t - 1).argmax(-1);  // (B, T-1)
  torch::Tensor m = batch.mask;  // (B, T-1): column j marks token j+1 as a solution token
  return ((guess == want).to(torch::kFloat) * m).sum().item<double>() / m.sum().item<double>();
}

TEST(RlDrafterWarmStart, DrafterLearnsThePolicysNextTokenAndIsCached) {
  model::Transformer policy = micro_policy(1);
  std::unique_ptr<Task> task = arithmetic_task();
  WarmStartOptions o;
  o.steps = 60, o.batch = 8;
  ASSERT_TRUE(supervised_warm_start(policy, *task, o).ok());
  torch::manual_seed(2);
  model::Drafter drafter(policy, 1);
  double before = drafter_agreement(policy, drafter, *task);
  torch::Tensor policy_weights = policy->lm_head->weight.clone();
  o.steps = 60, o.learning_rate = 1e-3;
  std::string path = ::testing::TempDir() + "/rl_drafter_warm_start.ckpt";
  std::remove(path.c_str());
  bool trained = false;
  ASSERT_TRUE(load_or_train_drafter_warm_start(policy, drafter, *task, o, path, &trained).ok());
  EXPECT_TRUE(trained);
  double after = drafter_agreement(policy, drafter, *task);
  EXPECT_GT(after, before + 0.2) << "before " << before << " after " << after;
  EXPECT_TRUE(torch::equal(policy->lm_head->weight, policy_weights)) << "the policy is only read";
  // A second call loads the cached drafter instead of training.
  torch::manual_seed(9);
  model::Drafter cached(policy, 1);
  ASSERT_TRUE(load_or_train_drafter_warm_start(policy, cached, *task, o, path, &trained).ok());
  EXPECT_FALSE(trained);
  EXPECT_DOUBLE_EQ(drafter_agreement(policy, cached, *task), after);
}

TEST(RlDrafterTraining, LossFallsOnAFixedBuffer) {
  model::Transformer target = micro_policy(6);
  model::Drafter drafter(target, 1);
  drafter::DrafterTrainer trainer(drafter, target, 3e-3);
  torch::manual_seed(7);
  torch::Tensor tokens = torch::randint(1, kTextVocab, {8, 32}, torch::kInt64);
  torch::Tensor hidden;
  {
    torch::NoGradGuard g;
    hidden = target->forward(tokens, torch::arange(32).unsqueeze(0).expand({8, 32})).hidden;
  }
  torch::Tensor mask = torch::ones({8, 32});
  // The soft cross-entropy cannot go below the entropy of the target's own distribution, so
  // the test watches the loss above that floor (0.5 * entropy; the regression half can reach 0).
  double floor;
  {
    torch::NoGradGuard g;
    torch::Tensor p = torch::softmax(target->lm_head(hidden.narrow(1, 1, 31)), -1);
    floor = 0.5 * (-(p * p.log()).sum(-1)).mean().item<double>();
  }
  auto excess = [&] {
    torch::NoGradGuard g;
    return drafter::drafter_loss(drafter, target, tokens, hidden, mask).item<double>() - floor;
  };
  double first = excess();
  for (int i = 0; i < 60; ++i) trainer.step(tokens, hidden, mask);
  double last = excess();
  EXPECT_GT(first, 0.0);
  EXPECT_LT(last, first * 0.5) << "floor " << floor;
}

TEST(RlChannel, MessagesSurvivePartialWritesAndEofIsUnavailable) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  Channel reader(p[0], -1);
  std::string a = nlohmann::json{{"op", "generate"}, {"n", 1}}.dump() + "\n";
  std::string b = nlohmann::json{{"op", "stop"}}.dump() + "\n";
  std::string both = a + b;
  // Written in three pieces that cut through a message.
  ASSERT_EQ(::write(p[1], both.data(), 5), 5);
  auto first = reader.receive(100);
  ASSERT_TRUE(first.ok());
  EXPECT_FALSE(first->has_value());  // half a line is not a message
  ASSERT_EQ(::write(p[1], both.data() + 5, both.size() - 5), ssize_t(both.size() - 5));
  auto m1 = reader.receive(1000);
  ASSERT_TRUE(m1.ok() && m1->has_value());
  EXPECT_EQ((**m1)["op"], "generate");
  auto m2 = reader.receive(1000);
  ASSERT_TRUE(m2.ok() && m2->has_value());
  EXPECT_EQ((**m2)["op"], "stop");
  ASSERT_EQ(::write(p[1], "{oops\n", 6), 6);
  auto bad = reader.receive(1000);
  EXPECT_EQ(bad.status().code(), StatusCode::kCorruption);
  ::close(p[1]);
  auto eof = reader.receive(1000);
  EXPECT_EQ(eof.status().code(), StatusCode::kUnavailable);
  ::close(p[0]);
}

}  // namespace
}  // namespace tlt::rl

namespace tlt::rl {
namespace {

// The rollout engines' per-phase seconds travel from a step's report to its JSON (and back), the
// job report's totals and the Prometheus counters.
TEST(RlReport, EnginePhasesReachTheStepJsonTheJobReportAndTheMetrics) {
  StepReport a, b;
  a.step = 1, b.step = 2;
  a.phase_seconds = {{"plain", 1.5}, {"verify", 0.25}};
  b.phase_seconds = {{"plain", 0.5}, {"draft", 0.125}};
  StepReport back = step_from_json(to_json(a));
  EXPECT_EQ(back.phase_seconds, a.phase_seconds);
  RLRunResult result;
  result.steps = {a, b};
  nlohmann::json totals = report::rl_result_json(result).at("generatingPhaseSeconds");
  EXPECT_EQ(totals.at("plain").get<double>(), 2.0);
  EXPECT_EQ(totals.at("verify").get<double>(), 0.25);
  EXPECT_EQ(totals.at("draft").get<double>(), 0.125);
  metrics::RuntimeMetrics m("j");
  WorkerNames names{"j", 1};
  publish_step(m, names, a, 1);
  publish_step(m, names, b, 1);
  std::string text = metrics::render(m);
  auto value = [&](const std::string& phase) {
    std::string series = "tlt_rollout_phase_seconds_total{job=\"j\",phase=\"" + phase + "\"} ";
    size_t at = text.find(series);
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + series.size()));
  };
  EXPECT_EQ(value("plain"), 2.0) << text;
  EXPECT_EQ(value("verify"), 0.25) << text;
  EXPECT_EQ(value("draft"), 0.125) << text;
}

// tlt_gpu_busy_ratio: the device's busy seconds where a worker's device measured them, else the
// timeline's generating and training intervals, each over the rollout phase.
TEST(RlReport, GpuBusyRatioIsTheDevicesWhereMeasuredElseTheTimelines) {
  StepReport r;
  r.step = 1, r.rollout_seconds = 10;
  r.timeline = {{0, "generating", 0, 8},
                {0, "released", 8, 10},
                {1, "generating", 0, 4},
                {1, "training", 4, 10}};
  EXPECT_EQ(busy_ratios(r), (std::vector<double>{0.8, 1.0}));
  EXPECT_STREQ(busy_source(r), "clock");
  r.device_busy_seconds = {3.0, -1};  // worker 1's device measured none of its calls
  EXPECT_EQ(busy_ratios(r), (std::vector<double>{0.3, 1.0}));
  EXPECT_STREQ(busy_source(r), "device");
  StepReport back = step_from_json(to_json(r));
  EXPECT_EQ(back.device_busy_seconds, r.device_busy_seconds);
  EXPECT_EQ(to_json(r).at("gpuBusyRatio"), nlohmann::json({0.3, 1.0}));
  RLRunResult result;
  result.steps = {r};
  nlohmann::json totals = report::rl_result_json(result);
  EXPECT_DOUBLE_EQ(totals.at("gpuBusyRatio").get<double>(), 0.65);
  EXPECT_EQ(totals.at("gpuBusyFrom"), "device");
  metrics::RuntimeMetrics m("j");
  publish_step(m, WorkerNames{"j", 2}, r, 2);
  std::string text = metrics::render(m);
  auto value = [&](const std::string& pod) {
    std::string series = "tlt_gpu_busy_ratio{job=\"j\",pod=\"" + pod + "\"} ";
    size_t at = text.find(series);
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + series.size()));
  };
  EXPECT_DOUBLE_EQ(value("j-rollout-0"), 0.3) << text;
  EXPECT_DOUBLE_EQ(value("j-rollout-1"), 1.0) << text;
  // A step without time has no ratios; an older report without the field reads as measured by
  // no device.
  StepReport empty;
  EXPECT_TRUE(busy_ratios(empty).empty());
  nlohmann::json old = to_json(r);
  old.erase("deviceBusySeconds");
  EXPECT_TRUE(step_from_json(old).device_busy_seconds.empty());
}

}  // namespace
}  // namespace tlt::rl
