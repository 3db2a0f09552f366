#include "bench/rollout_sharing.h"

#include <algorithm>
#include <cstdio>

#include "bench/rollout_ceiling.h"
#include "runtime/clock.h"
#include "runtime/model/precision.h"
#include "runtime/rl/policy_trainer.h"
#include "runtime/rl/sequences.h"

namespace tlt::bench {

// What sharing a GRPO group's prompt buys the policy update (rl::GrpoOptions::share_prompts): one
// whole update (rl::PolicyTrainer::update: reference and old log-probabilities, two minibatch
// steps) over one group of 8 answers to one prompt, each sample running its whole sequence
// against the prompt run once per pass, side by side, the fastest of 2 each. The shape is
// bench/rl_e2e_model.yaml's first step on SmolLM2: a 96-token chat prompt (arithmetic-cot's
// through SmolLM2's template: 90-100 tokens), answers long-tailed around a median of ~60 tokens
// (lengths below), products in bfloat16 where the device has them (spec.model.dtype auto).
void print_update_sharing(const model::Transformer& target) {
  const int64_t prompt = std::min<int64_t>(96, target->config().max_seq / 4);
  std::vector<int64_t> lengths{222, 120, 80, 65, 58, 50, 40, 30};
  torch::manual_seed(5);
  torch::Tensor p = torch::randint(target->config().vocab, {prompt}, torch::kInt64);  // (P,)
  std::vector<int64_t> ids(p.data_ptr<int64_t>(), p.data_ptr<int64_t>() + prompt);
  std::vector<std::vector<int64_t>> prompts, responses;
  int64_t positions = 0;
  for (int64_t n : lengths) {
    n = std::min<int64_t>(n, target->config().max_seq - prompt);
    torch::Tensor r = torch::randint(target->config().vocab, {n}, torch::kInt64);  // (n,)
    prompts.push_back(ids);
    responses.emplace_back(r.data_ptr<int64_t>(), r.data_ptr<int64_t>() + n);
    positions += prompt + n;
  }
  rl::SequenceBatch batch = rl::make_batch(prompts, responses);
  torch::Tensor advantages = torch::randn({int64_t(lengths.size())});  // (B,)
  auto seconds = [&](bool share, int64_t* run) {
    rl::GrpoOptions o;
    o.kl_coef = 0.01, o.temperature = 0.7, o.share_prompts = share;
    o.bfloat16 = model::native_bfloat16(target->lm_head->weight.device());
    double best = 1e30;
    for (int rep = 0; rep < 2; ++rep) {
      rl::PolicyTrainer trainer(target, target, o);  // the update moves target's weights a little
      double t0 = runtime::now_s();
      rl::UpdateStats st = trainer.update(batch, advantages);
      finish_device(target);
      best = std::min(best, runtime::now_s() - t0);
      *run = st.positions;
    }
    return best;
  };
  int64_t whole_positions = 0, shared_positions = 0;
  double whole = seconds(false, &whole_positions), shared = seconds(true, &shared_positions);
  std::printf(
      "\npolicy update of one GRPO group (8 answers of %lld-%lld tokens to one %lld-token prompt, "
      "%lld tokens): whole sequences %.2f s (%lld positions per pass), prompt shared %.2f s (%lld) "
      "= %.2fx\n",
      (long long)lengths.back(), (long long)lengths.front(), (long long)prompt,
      (long long)positions, whole, (long long)whole_positions, shared, (long long)shared_positions,
      whole / shared);
}

}  // namespace tlt::bench
