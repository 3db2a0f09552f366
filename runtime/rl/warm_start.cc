#include "runtime/rl/warm_start.h"

#include <filesystem>
#include <numeric>

#include "runtime/model/checkpoint.h"
#include "runtime/rl/sequences.h"
#include "runtime/rl/text.h"
#include "runtime/rollout/engine.h"

namespace tlt::rl {

double supervised_warm_start(model::Transformer policy, const Task& task,
                             const WarmStartOptions& options,
                             const std::function<void(int64_t, double)>& progress) {
  torch::manual_seed(options.seed);
  torch::optim::AdamW opt(policy->parameters(),
                          torch::optim::AdamWOptions(options.learning_rate).weight_decay(0.01));
  policy->train();
  std::vector<double> recent;
  uint64_t next = 0;
  for (int64_t s = 0; s < options.steps; ++s) {
    std::vector<std::vector<int64_t>> prompts, responses;
    while (int64_t(prompts.size()) < options.batch) {
      Problem p = task.problem(next++, /*held_out=*/false);
      if (int64_t(p.prompt.size()) > options.max_prompt_chars) continue;
      prompts.push_back(encode_text(p.prompt));
      std::vector<int64_t> r = encode_text(p.solution);
      r.push_back(kEndOfText);
      if (int64_t(r.size()) > options.max_response_tokens) r.resize(options.max_response_tokens);
      responses.push_back(std::move(r));
    }
    SequenceBatch batch = make_batch(prompts, responses);
    // Linear warm-up over the first 10% of steps, then cosine decay to 10%.
    double frac = double(s) / double(options.steps);
    double lr = options.learning_rate *
                (frac < 0.1 ? (s + 1) / (0.1 * options.steps)
                            : 0.1 + 0.45 * (1 + std::cos(M_PI * (frac - 0.1) / 0.9)));
    for (auto& g : opt.param_groups()) g.options().set_lr(lr);
    opt.zero_grad();
    torch::Tensor logp = sequence_logprobs(policy, batch, 1.0);  // (B, T-1)
    torch::Tensor loss = -(logp * batch.mask).sum() / batch.mask.sum().clamp_min(1.0);
    loss.backward();
    torch::nn::utils::clip_grad_norm_(policy->parameters(), 1.0);
    opt.step();
    double l = loss.item<double>();
    recent.push_back(l);
    if (recent.size() > 10) recent.erase(recent.begin());
    if (progress) progress(s + 1, l);
  }
  policy->eval();
  return recent.empty() ? 0.0 : std::accumulate(recent.begin(), recent.end(), 0.0) / recent.size();
}

Status load_or_train_warm_start(model::Transformer policy, const Task& task,
                                const WarmStartOptions& options, const std::string& path,
                                bool* trained,
                                const std::function<void(int64_t, double)>& progress) {
  std::error_code ec;
  *trained = false;
  if (std::filesystem::exists(path, ec)) {
    StatusOr<std::string> meta = model::load_checkpoint(*policy, path);
    if (!meta.ok()) return meta.status().with_context("warm start " + path);
    return Status::Ok();
  }
  double loss = supervised_warm_start(policy, task, options, progress);
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  *trained = true;
  return model::save_checkpoint(
      *policy, path,
      "warm start: steps=" + std::to_string(options.steps) + " loss=" + std::to_string(loss));
}

StatusOr<HeldOutResult> evaluate_held_out(model::Transformer policy, const Task& task, int64_t n,
                                          int32_t max_tokens, double temperature, int64_t samples,
                                          uint64_t seed) {
  if (temperature <= 0) samples = 1;
  torch::NoGradGuard no_grad;
  policy->eval();
  rollout::EngineOptions eo;
  eo.speculative = false;
  eo.max_batch = std::max<int64_t>(1, n * samples);
  eo.max_seq = policy->config().max_seq;
  StatusOr<std::unique_ptr<rollout::Engine>> engine =
      rollout::Engine::create(policy, model::Drafter(nullptr), eo);
  if (!engine.ok()) return engine.status();
  std::vector<Problem> problems;
  std::vector<rollout::Request> requests;
  for (int64_t i = 0; i < n; ++i) {
    problems.push_back(task.problem(uint64_t(i), /*held_out=*/true));
    for (int64_t k = 0; k < samples; ++k) {
      rollout::Request r;
      r.id = i * samples + k;
      r.prompt = encode_text(problems.back().prompt);
      r.max_new_tokens = max_tokens;
      r.stop_token = kEndOfText;
      r.sampling.temperature = temperature;
      r.seed = seed * 1000003ull + uint64_t(r.id);
      requests.push_back(std::move(r));
    }
  }
  StatusOr<std::vector<rollout::Completion>> out = (*engine)->generate(requests);
  if (!out.ok()) return out.status();
  HeldOutResult res;
  res.problems = n;
  for (size_t j = 0; j < out->size(); ++j) {
    res.reward += task.reward(problems[j / size_t(samples)], decode_text((*out)[j].tokens));
    res.mean_tokens += double((*out)[j].tokens.size());
  }
  if (!out->empty()) res.reward /= double(out->size()), res.mean_tokens /= double(out->size());
  return res;
}

}  // namespace tlt::rl
