#include "bench/rollout_drafter.h"

#include <algorithm>
#include <cstdio>

#include "runtime/clock.h"
#include "runtime/data/token_file.h"
#include "runtime/rl/drafter_on_generations.h"

namespace tlt::bench {

namespace {

// One drafter warm-started on the target's own sampled answers to the task's training problems
// (rl::load_or_train_drafter_on_generations, cached under cache_root()).
StatusOr<rl::GenerationsWarmStart> warm_start(model::Transformer target, model::Drafter drafter,
                                              const DrafterSource& s, const DrafterOptions& d,
                                              const Table& t) {
  rl::GenerationsWarmStartOptions o;
  o.steps = d.steps, o.max_new_tokens = t.max_new, o.vocab_subset = d.vocab;
  o.prompts = d.prompts;
  o.bfloat16 = o.train_bfloat16 = t.decode.bfloat16;
  o.train_levels = d.levels;
  o.temperature = d.temperature;  // the rollouts' own, as an RLJob's warm start samples
  o.max_seq = t.decode.max_seq, o.codec = s.codec;
  o.log = [](const std::string& line) { std::printf("  %s\n", line.c_str()), std::fflush(stdout); };
  o.curve_every = std::max(1, d.steps / 4);  // the acceptance curve, printed as it trains
  double t0 = runtime::now_s();
  std::printf(
      "drafter (features=%s, %d layer%s): warm start on %s generations (%lld prompts, %d steps, %d "
      "training levels, sampled at temperature %g)\n",
      model::drafter_features_name(drafter->features_mode()), d.layers, d.layers == 1 ? "" : "s",
      s.generations.c_str(), (long long)o.prompts, d.steps, d.levels, d.temperature);
  std::fflush(stdout);
  return rl::load_or_train_drafter_on_generations(
      target, drafter, *s.task, o, s.model_key, s.task_key, data::cache_root(),
      [&](int64_t step, double loss) {
        if (step % std::max(1, d.steps / 5) == 0) {
          std::printf("  drafter step %lld loss %.3f (%.0f s)\n", (long long)step, loss,
                      runtime::now_s() - t0);
          std::fflush(stdout);
        }
      });
}

// Greedy agreement of the drafter with the target, level by level, on the target's greedy answers
// to held-out problems the table does not decode (rl::held_out_agreement). Its errors.
Status print_agreement(model::Transformer target, model::Drafter drafter, const DrafterSource& s,
                       const Table& t) {
  constexpr int64_t kFirst = 1000, kProblems = 32, kLevels = 6;
  double t0 = runtime::now_s();
  StatusOr<drafter::LevelAgreement> a =
      rl::held_out_agreement(target, drafter, *s.task, s.codec, kFirst, kProblems, t.max_new,
                             t.decode.max_seq, kLevels, t.decode.bfloat16);
  if (!a.ok()) return a.status();
  std::printf(
      "drafter: greedy chains on %lld held-out answers (%lld bases, %.0f s): share whose "
      "first d drafts all match the target\n  d:",
      (long long)kProblems, (long long)(a->bases.empty() ? 0 : a->bases[0]), runtime::now_s() - t0);
  for (size_t d = 0; d < a->bases.size(); ++d) std::printf(" %zu=%.3f", d + 1, a->share(d));
  double sum = 0;
  for (size_t d = 0; d < a->bases.size(); ++d) sum += a->share(d);
  std::printf("\n  accepted drafts per verification of a greedy chain of %lld: %.2f\n",
              (long long)a->bases.size(), sum);
  std::fflush(stdout);
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<NamedDrafter>> warm_start_drafters(const RolloutOptions& o,
                                                        model::Transformer target,
                                                        const DrafterSource& source,
                                                        const Table& t) {
  // Every drafter before any warm start: a fused one turns on the target's feature export, and
  // all then generate with it on. The export leaves the target's tokens as they were, so each
  // warm start (same options, same seeds) trains on the same generations.
  std::vector<NamedDrafter> drafters;
  for (const std::string& f : o.drafter.features) {
    torch::manual_seed(1);
    drafters.push_back(
        {f, model::Drafter(target, o.drafter.layers, *model::parse_drafter_features(f))});
  }
  for (NamedDrafter& nd : drafters) {
    StatusOr<rl::GenerationsWarmStart> w = warm_start(target, nd.drafter, source, o.drafter, t);
    if (!w.ok()) return w.status();
    std::printf(
        "drafter (features=%s): %s %s (%lld generated tokens, loss %.3f -> %.3f, draft "
        "vocabulary %lld)\n",
        nd.name.c_str(), w->trained ? "trained and cached" : "loaded", w->cache_path.c_str(),
        (long long)w->generated_tokens, w->loss_first, w->loss_last,
        (long long)nd.drafter->draft_vocab_size());
    if (o.prepare_only) TLT_RETURN_IF_ERROR(print_agreement(target, nd.drafter, source, t));
  }
  return drafters;
}

}  // namespace tlt::bench
