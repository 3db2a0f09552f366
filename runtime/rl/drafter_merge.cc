#include "runtime/rl/drafter_merge.h"

namespace tlt::rl {
namespace {

bool all_finite(model::Drafter& d) {
  for (const torch::Tensor& p : d->parameters())
    if (!torch::isfinite(p).all().item<bool>()) return false;
  return true;
}

}  // namespace

StatusOr<int64_t> merge_drafter_parts(model::Drafter& drafter, model::Transformer policy,
                                      int64_t n_layers, const DrafterParts& parts,
                                      const std::function<void(const std::string&)>& log) {
  torch::NoGradGuard no_grad;
  model::Drafter d(std::move(policy), n_layers, drafter->features_mode());  // each part in turn
  DrafterParts sound;
  int64_t total = 0;
  for (const auto& [path, steps] : parts) {
    if (steps <= 0) continue;
    StatusOr<std::string> meta = model::load_drafter_checkpoint(d, path);
    if (!meta.ok() || !all_finite(d)) {
      if (log)
        log("drafter merge: left out " + path + ": " +
            (meta.ok() ? std::string("a weight is not finite") : meta.status().message()));
      continue;
    }
    sound.push_back({path, steps});
    total += steps;
  }
  if (total == 0) return int64_t(0);
  std::vector<torch::Tensor> sum;
  for (auto& p : drafter->parameters()) sum.push_back(torch::zeros_like(p));
  for (const auto& [path, steps] : sound) {
    TLT_RETURN_IF_ERROR(model::load_drafter_checkpoint(d, path).status());
    auto ps = d->parameters();
    for (size_t i = 0; i < ps.size(); ++i) sum[i] += ps[i] * (double(steps) / double(total));
  }
  auto mine = drafter->parameters();
  for (size_t i = 0; i < mine.size(); ++i) mine[i].copy_(sum[i]);
  return int64_t(sound.size());
}

}  // namespace tlt::rl
