// Choosing a drafting strategy (an "arm") per step: an epsilon-greedy bandit per batch-size
// bucket, optionally per (bucket, context) cell. Each step reports the tokens it emitted
// (accepted tokens x batch size, plus the target's own) and its wall time; choose() names the
// arm for the next step. Where each part lives: selector.cc (trials, values, exploration,
// pooling), selector_floor.cc (the floor under a reference arm), plain_cost.h (P(b)) and
// arm_stats.h (ratio estimates and their intervals).
//
// What the selector promises:
//   - choose() returns an arm in [0, n_arms); its only randomness is the selector's own stream,
//     seeded by Options::seed: one seed and one sequence of calls give the same choices.
//   - Every cell tries every arm (min_samples steps each, from the trial offset on) before it
//     exploits one: one step is too noisy, since an arm's first step may carry one-off costs.
//     After that, exploration (probability epsilon) keeps refreshing the other arms' values.
//   - With a reference arm, exploitation does not leave the reference for an arm that may be
//     slower than it by more than kTolerance (the floor, below), and exploration stops while
//     explored steps have cost more than kExploreBudget of the cell's time over its leader.
//   - A step is kept in its cell's window for its arm (the last `window` steps there); values
//     and intervals read only those windows and, with a reference arm, P(b).
//   - absorb() counts another selector's step exactly as report_step() counts one's own.
//
// Values (Value): an arm's value comes from its last `window` steps in its cell (with a floor,
// in its cell's context and bucket: below):
//   kThroughput  tokens over seconds summed across those steps, leaving out steps slower than
//                4x their median time (one-off costs: allocation, a drafter catching up). The
//                arm that maximises this maximises the engine's tokens/s. The default.
//   kMedianRate  the median of the steps' tokens/s, which shrugs off the odd slow step but
//                undervalues an arm whose acceptance is all-or-nothing (an n-gram draft that
//                either copies a long run or nothing has a median near one token a step,
//                whatever its mean), which keeps the bandit off such an arm when it is the best.
// Exploration (Explore), once a cell's trials are done:
//   kUniform   every arm alike.
//   kWeighted  in proportion to the arm's value: an arm at half the best one's value is explored
//              half as often, so exploring arms that lose costs less, while every arm is still
//              tried.
//
// The floor (a reference arm, the engine's "decode plainly", Options::reference >= 0). Each arm's
// confidence interval is its value plus or minus kZ standard errors (arm_stats.h):
//   - A cell tries the reference first, then the others; an arm whose interval lies wholly below
//     another arm's is ruled out and skips the rest of its trials.
//   - Exploitation leaves the reference only for an arm whose value is above the reference's and
//     whose pessimistic value (its value less one standard error) is at least 1 - kTolerance of
//     it; among those, the best pessimistic value wins. So an arm that may be slower than plain
//     by more than kTolerance does not displace it, while one that is probably faster does before
//     its interval clears plain's: demanding that would keep plain on through a drafter's steps,
//     and plain steps between drafting steps make the drafter catch up, which costs the arm the
//     margin it would have shown.
//   - Exploration (probability epsilon) picks, among the arms not ruled out and the exploited
//     one left out, the one with the highest upper bound (the likeliest to overtake); when every
//     other arm is ruled out the verdict is known, and it explores only with probability
//     epsilon * kRecheck, then uniformly (a verdict may go stale: the drafter improves).
//   - Exploration has a budget: what explored steps cost over the leader (their seconds less the
//     seconds the leader would have taken for their tokens, at its value then) stays within
//     kExploreBudget of the cell's time, counting the step about to be explored at its expected
//     cost. Where timing noise keeps every interval wide (a shared machine), epsilon-exploration
//     of arms that lose would otherwise cost epsilon times their loss on every step.
//   - Steps are valued against plain decoding at their own batch size: n tokens over b requests
//     in s seconds are worth n * P(b) / s (plain_cost.h). An arm's value is then its speedup over
//     plain decoding (the reference's is about 1). Tokens/s alone would bias every verdict
//     against the drafting arms: a bucket's trials run in order while its tail shrinks, so plain
//     is measured at the bucket's largest batch sizes (its fastest tokens/s) and the arms after
//     it at smaller ones.
//   - That speedup has two factors, estimated from different steps ("decomposed" values, with
//     kThroughput and once plain steps were reported): the tokens a step emits per request
//     (acceptance: how well the arm drafts, which depends on the context but hardly on the batch
//     size) from the arm's steps in every bucket of the cell's context, and the plain steps one
//     of its steps costs, sum(s) / sum(P(b) * b) (which depends on the batch size, hardly on the
//     context) from its steps in every context of the cell's bucket. value = acceptance / cost,
//     its standard error by the delta method. A cell then needs min_samples steps of an arm in
//     its context and min(min_samples, kCostSteps) in its bucket, not min_samples of its own, so
//     short tails that leave a cell's trials unfinished still reach a verdict.
//   - Where P(b) is not yet known near a batch size (PlainCost::needs_calibration), the bandit
//     decodes plainly first (a calibration step: it costs nothing against the floor).
// Without a reference arm the plain epsilon-greedy rules above hold.
//
// Contexts: with Options::contexts > 1 the statistics are kept per (bucket, context) cell. The
// engine passes whether most requests can copy their draft from their own context: there the
// arms' values differ from the rest of a response (a repeating stretch favours long drafts).
//
// Pooling: selectors of the same arms, buckets and contexts (the rollout workers of one job) can
// share what they measured. One keeps the steps reported to it (keep_observations), hands them
// out (take_observations), and another absorbs them: its values, intervals, P(b) and exploration
// budget then count them as if it had made those steps itself. Given different trial offsets (a
// worker's index), pooled selectors try different arms first, so what one tried the others need
// not try again once its steps arrive, and every verdict rests on all the workers' steps.
//
// Thread safety: none; one engine thread owns a selector.
#pragma once

#include <cstdint>
#include <deque>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "runtime/rollout/arm_stats.h"
#include "runtime/rollout/plain_cost.h"

namespace tlt::rollout {

class ArmSelector {
 public:
  enum class Value { kThroughput, kMedianRate };
  enum class Explore { kUniform, kWeighted };

  // How a selector is set up; each field's comment gives an example and why. The constructor
  // clamps what is out of range (see each field) rather than failing: api validates the spec.
  struct Options {
    // Lower bounds of the batch-size buckets, strictly increasing from 1, e.g. {1, 2, 5, 21}:
    // the best arm changes with the batch size (verification costs more at larger batches).
    std::vector<int32_t> buckets{1};
    // Arms, e.g. 4 (three drafting arms and plain decoding); arms are indices [0, n_arms).
    int32_t n_arms = 1;
    // Probability of an exploration step once trials are done, e.g. 0.1: a verdict can go stale
    // (the drafter improves), so some steps keep checking the other arms.
    double epsilon = 0.1;
    // Steps kept per arm and cell, e.g. 32: recent enough to follow a drafter that improves,
    // many enough for a standard error.
    int32_t window = 32;
    // Seed of the selector's random stream (exploration draws), e.g. the engine's seed.
    uint64_t seed = 0;
    // Trial steps per arm before exploiting, e.g. 3 (clamped to [1, window]): one step is too
    // noisy, since an arm's first step may carry one-off costs.
    int32_t min_samples = 3;
    // Contexts per bucket, e.g. 2 with copied drafts (can most requests copy, or not); at least 1.
    int32_t contexts = 1;
    // How an arm's steps are valued (see the top); kThroughput maximises tokens/s.
    Value value = Value::kThroughput;
    // How exploration picks an arm without a reference arm (see the top).
    Explore explore = Explore::kUniform;
    // The arm that decodes plainly, e.g. n_arms - 1, for the floor (see the top); -1 (or any
    // value outside [0, n_arms)) for none.
    int32_t reference = -1;
  };

  explicit ArmSelector(Options options);

  static constexpr double kZ = 2.0;           // half-width of a confidence interval, in errors
  static constexpr double kRecheck = 0.1;     // share of exploration left once a verdict is known
  static constexpr double kTolerance = 0.03;  // what exploitation risks against the reference
  // Exploration's cost over the leader, as a share of a cell's time (with a reference arm).
  static constexpr double kExploreBudget = 0.01;
  // Plain steps near a batch size before its steps are valued against plain decoding there.
  static constexpr int32_t kCalibrationSteps = PlainCost::kCalibrationSteps;
  // Plain steps kept per batch size for P(b).
  static constexpr size_t kPlainWindow = PlainCost::kWindow;
  // Steps of an arm in a bucket before its cost there counts as measured (decomposed values).
  static constexpr size_t kCostSteps = 2;

  // "throughput" or "median" (api's spec.speculative.selector.value); false for anything else.
  static bool parse_value(const std::string& name, Value* out);
  // "uniform" or "weighted" (spec.speculative.selector.exploration); false for anything else.
  static bool parse_explore(const std::string& name, Explore* out);

  // The arm to use for a step over `batch_size` active requests in `context` [0, contexts).
  int32_t choose(int64_t batch_size, int32_t context = 0);
  // Records a step made with `arm` at `batch_size` in `context`: the tokens it emitted and its
  // wall time in seconds (> 0).
  void report_step(int64_t batch_size, int32_t arm, double tokens, double seconds,
                   int32_t context = 0);
  // A step given as its rate alone (tokens per second, as if it took one second).
  void report(int64_t batch_size, int32_t arm, double reward, int32_t context = 0) {
    report_step(batch_size, arm, reward, 1.0, context);
  }

  // One reported step, as another selector absorbs it (pooling, see the top).
  struct Observation {
    int64_t batch_size = 1;
    int32_t arm = 0, context = 0;
    double tokens = 0.0, seconds = 0.0;
    double explore_cost = 0.0;  // what the step cost over the leader when it was explored, else 0
  };
  // From now on, keeps every step report_step() records (not absorbed ones) for
  // take_observations(); off by default.
  void keep_observations(bool keep) { keep_ = keep; }
  // The steps kept since the last call, oldest first (none unless keep_observations(true)).
  std::vector<Observation> take_observations() { return std::exchange(kept_, {}); }
  // Arms are tried in index order from this one on (the reference still first): pooled selectors
  // given different offsets (a worker's index) try different arms first and share the results.
  void set_trial_offset(int32_t offset) {
    trial_offset_ = n_arms_ > 0 ? ((offset % n_arms_) + n_arms_) % n_arms_ : 0;
  }
  // Counts a step that another selector of the same arms, buckets and contexts recorded, as
  // report_step() counts this one's own, its exploration cost included. False, and nothing
  // changes, when the arm or context is outside this selector's or the step has no time.
  bool absorb(const Observation& step);

  // Seconds plain decoding costs a token at `batch_size` (P(b) above), from the reference
  // arm's steps; -1 without a reference arm or before its first step.
  double plain_seconds_per_token(int64_t batch_size) const;
  // True when no batch size within a quarter of `batch_size` has kCalibrationSteps plain steps.
  bool needs_calibration(int64_t batch_size) const;

  int32_t bucket_of(int64_t batch_size) const;
  // The statistics cell of a batch size and context: bucket * contexts + context.
  int32_t cell_of(int64_t batch_size, int32_t context = 0) const;
  // The value of `arm` in `cell` (tokens/s, see Value; with a reference arm, its speedup over
  // plain decoding once plain steps were reported), or -1 when it has no steps yet (with a
  // reference arm: none in the cell's context, or none in its bucket).
  double value(int32_t cell, int32_t arm) const;
  // The standard error of value(cell, arm): infinity below two steps.
  double standard_error(int32_t cell, int32_t arm) const;
  // True when another arm's confidence interval in `cell` lies wholly above this arm's.
  bool ruled_out(int32_t cell, int32_t arm) const;
  // The arm with the highest value in `cell` (first arm with fewer than min_samples rewards if
  // any). With a reference arm: the first arm of the trial order that still needs samples and is
  // not ruled out, else the best pessimistic value.
  int32_t best(int32_t cell) const;
  int32_t contexts() const { return contexts_; }
  int32_t n_arms() const { return n_arms_; }
  int32_t reference() const { return reference_; }
  int64_t explorations() const { return explorations_; }
  // Seconds explored steps of `cell` cost over its leader, and all its steps' seconds.
  double exploration_cost(int32_t cell) const { return cells_[size_t(cell)].explore_cost; }
  double cell_seconds(int32_t cell) const { return cells_[size_t(cell)].seconds; }

 private:
  using Step = ArmStep;
  struct Estimate {
    double value = -1.0, error = std::numeric_limits<double>::infinity();
    double accept = -1.0;                     // tokens a step emits per request
    size_t accept_steps = 0, cost_steps = 0;  // the steps behind each factor
    uint64_t generation = 0;                  // generation_ when computed; 0: never
  };
  struct CellTotals {
    double seconds = 0.0;       // every step reported in the cell
    double explore_cost = 0.0;  // explored steps' seconds over the leader's (see the top)
    int32_t explored_arm = -1;  // the arm choose() explored last (-1: it exploited)
    double leader_value = 0.0;  // the leader's value when it did
  };

  // Constant after construction.
  const std::vector<int32_t> buckets_;
  const int32_t n_arms_;
  const double epsilon_;
  const size_t window_;
  const size_t min_samples_;
  const int32_t contexts_;
  const Value value_;
  const Explore explore_;
  const int32_t reference_;

  std::mt19937_64 rng_;
  std::vector<std::vector<std::deque<Step>>> steps_;  // [cell][arm] -> recent steps
  PlainCost plain_;                                   // P(b), from the reference arm's steps
  mutable std::vector<Estimate> estimates_;  // [cell * n_arms + arm], recomputed after a report
  uint64_t generation_ = 1;
  int64_t explorations_ = 0;
  std::vector<CellTotals> cells_;
  bool keep_ = false;
  int32_t trial_offset_ = 0;
  std::vector<Observation> kept_;  // report_step()'s steps since take_observations()

  // choose() without a reference arm, exploring (Explore).
  int32_t explore(int32_t cell);
  // The statistics' half of report_step() and absorb(): the step's seconds and exploration cost
  // into its cell's totals, the step into its arm's window and, for the reference, P(b)'s.
  void count(int32_t cell, int32_t arm, const Step& step, double explore_cost);
  // What a step is worth: its tokens times P(b) with a reference arm and plain steps (plain
  // seconds), else its tokens.
  double worth(const Step& s) const;
  // Whether values are decomposed (see the top): the throughput value, a reference arm, and
  // plain steps reported.
  bool decomposed() const;
  Estimate estimate(int32_t cell, int32_t arm) const;
  // Whether `arm` still needs trial steps in `cell` (min_samples; decomposed: per factor).
  bool needs_trial(int32_t cell, int32_t arm) const;
  // Steps of `cell` that value() counts for `arm` (the throughput value leaves out outliers).
  std::vector<Step> counted(int32_t cell, int32_t arm) const;
  // (worth, seconds) of the steps counted(cell, arm).
  std::vector<std::pair<double, double>> worth_pairs(int32_t cell, int32_t arm) const;

  // The floor under the reference arm (selector_floor.cc; see the top).
  // choose() with a reference arm.
  int32_t choose_bounded(int64_t batch_size, int32_t cell);
  // best() with a reference arm.
  int32_t best_bounded(int32_t cell) const;
  // Seconds an explored step of `arm` at `batch_size` is expected to cost over `leader`
  // (decomposed values; else 0).
  double expected_explore_cost(int64_t batch_size, int32_t cell, int32_t arm, int32_t leader) const;
};

}  // namespace tlt::rollout
