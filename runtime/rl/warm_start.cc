#include "runtime/rl/warm_start.h"

#include <filesystem>
#include <limits>
#include <numeric>

#include "runtime/drafter/trainer.h"
#include "runtime/model/checkpoint.h"
#include "runtime/rl/sequences.h"
#include "runtime/rl/text.h"

namespace tlt::rl {
namespace {

// The next options.batch training problems (from index *next on) whose prompt has at most
// max_prompt_chars characters, as prompt -> solution + end token, cut to max_response_tokens.
// The codec's errors.
StatusOr<SequenceBatch> solution_batch(const Task& task, const WarmStartOptions& options,
                                       int64_t max_prompt_chars, uint64_t* next) {
  const Codec& codec = options.codec ? *options.codec : ascii_codec();
  std::vector<std::vector<int64_t>> prompts, responses;
  while (int64_t(prompts.size()) < options.batch) {
    uint64_t index = (*next)++;
    Problem p = task.problem(index, /*held_out=*/false);
    if (int64_t(p.prompt.size()) > max_prompt_chars) continue;
    if (unmarked_in_warm_start(options.seed, index, options.unmarked_answers))
      p.solution = unmark_final_answer(p.solution);
    StatusOr<std::vector<int64_t>> prompt = prompt_ids(codec, task, p);
    if (!prompt.ok()) return prompt.status();
    StatusOr<std::vector<int64_t>> r = codec.encode(p.solution);
    if (!r.ok()) return r.status();
    r->push_back(codec.end_ids().front());
    if (int64_t(r->size()) > options.max_response_tokens) r->resize(options.max_response_tokens);
    if (options.max_seq > 0 && int64_t(prompt->size() + r->size()) > options.max_seq) continue;
    prompts.push_back(std::move(*prompt));
    responses.push_back(std::move(*r));
  }
  return make_batch(prompts, responses);
}

double mean(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
}

}  // namespace

bool unmarked_in_warm_start(uint64_t seed, uint64_t index, double share) {
  if (share <= 0) return false;
  uint64_t x = (seed + 1) * 0x9E3779B97F4A7C15ull ^ (index * 0xD1B54A32D192ED03ull);
  x ^= x >> 31, x *= 0xBF58476D1CE4E5B9ull, x ^= x >> 29;
  return double(x >> 11) / double(1ull << 53) < share;
}

StatusOr<double> supervised_warm_start(model::Transformer policy, const Task& task,
                                       const WarmStartOptions& options,
                                       const std::function<void(int64_t, double)>& progress) {
  torch::manual_seed(options.seed);
  torch::optim::AdamW opt(model::trainable_parameters(policy),  // a tied head: one step
                          torch::optim::AdamWOptions(options.learning_rate).weight_decay(0.01));
  policy->train();
  std::vector<double> recent;
  uint64_t next = 0;
  for (int64_t s = 0; s < options.steps; ++s) {
    StatusOr<SequenceBatch> next_batch =
        solution_batch(task, options, options.max_prompt_chars, &next);
    if (!next_batch.ok()) return next_batch.status();
    const SequenceBatch& batch = *next_batch;
    // Linear warm-up over the first 10% of steps, then cosine decay to 10%.
    double frac = double(s) / double(options.steps);
    double lr = options.learning_rate *
                (frac < 0.1 ? (s + 1) / (0.1 * options.steps)
                            : 0.1 + 0.45 * (1 + std::cos(M_PI * (frac - 0.1) / 0.9)));
    for (auto& g : opt.param_groups()) g.options().set_lr(lr);
    opt.zero_grad();
    // The batch's loss is sum(-logp * mask) / n over all its solution tokens; a micro-batch's
    // share is its own sum over the same n, so accumulated gradients equal one padded batch's
    // while a long-tailed batch costs the tokens it has, not B x longest.
    double n = std::max(1.0, batch.mask.sum().item<double>()), l = 0.0;
    int64_t b = batch.tokens.size(0);
    for (const MicroBatch& mb : plan_microbatches(batch, 0, b, options.max_tokens_per_microbatch)) {
      if (options.cancelled && options.cancelled())
        return Status::Aborted("stopped during the policy's warm start (step " +
                               std::to_string(s + 1) + " of " + std::to_string(options.steps) +
                               "); nothing was cached");
      SequenceBatch part = to_device(gather_rows(batch, mb), policy->lm_head->weight.device());
      torch::Tensor logp = sequence_logprobs(policy, part, 1.0);  // (b, t-1)
      torch::Tensor loss = -(logp * part.mask).sum() / n;
      loss.backward();
      l += loss.item<double>();
    }
    model::fold_tied_gradient(policy);
    torch::nn::utils::clip_grad_norm_(policy->parameters(), 1.0);
    opt.step();
    recent.push_back(l);
    if (recent.size() > 10) recent.erase(recent.begin());
    if (progress) progress(s + 1, l);
  }
  policy->eval();
  return mean(recent);
}

StatusOr<double> drafter_warm_start(model::Transformer policy, model::Drafter drafter,
                                    const Task& task, const WarmStartOptions& options,
                                    const std::function<void(int64_t, double)>& progress) {
  torch::manual_seed(options.seed);
  policy->eval();
  drafter::DrafterTrainer trainer(drafter, policy, options.learning_rate, options.drafter_levels);
  std::vector<double> recent;
  uint64_t next = 0;
  for (int64_t s = 0; s < options.steps; ++s) {
    StatusOr<SequenceBatch> next_batch =
        solution_batch(task, options, std::numeric_limits<int64_t>::max(), &next);
    if (!next_batch.ok()) return next_batch.status();
    const SequenceBatch batch = to_device(*next_batch, policy->lm_head->weight.device());
    int64_t b = batch.tokens.size(0), t = batch.tokens.size(1);
    torch::Tensor hidden;  // (B, T, F): the drafter's features
    {
      torch::NoGradGuard no_grad;
      torch::Tensor starts = torch::zeros({b}, batch.tokens.options());  // (B,) int64
      hidden =
          policy->forward(batch.tokens, model::sequential_positions(starts, t)).drafter_features();
    }
    // (B, T): 1 where position j is a solution token (the drafter's mask is one column wider
    // than the targets' mask: column j marks token j).
    torch::Tensor mask = torch::cat({torch::zeros({b, 1}, batch.mask.options()), batch.mask}, 1);
    recent.push_back(trainer.step(batch.tokens, hidden, mask));
    if (recent.size() > 10) recent.erase(recent.begin());
    if (progress) progress(s + 1, recent.back());
  }
  drafter->eval();
  return mean(recent);
}

namespace {

// Loads `module` from `path` when the file exists; otherwise runs `train` (which returns the mean
// loss of its last steps) and saves the result there, described as `what`.
Status load_or_train(torch::nn::Module& module, const std::string& path, const std::string& what,
                     int64_t steps, const std::function<StatusOr<double>()>& train, bool* trained) {
  std::error_code ec;
  *trained = false;
  if (std::filesystem::exists(path, ec)) {
    StatusOr<std::string> meta = model::load_checkpoint(module, path);
    if (!meta.ok()) return meta.status().with_context(what + " " + path);
    return Status::Ok();
  }
  StatusOr<double> loss = train();
  if (!loss.ok()) return loss.status().with_context(what);
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  *trained = true;
  return model::save_checkpoint(
      module, path, what + ": steps=" + std::to_string(steps) + " loss=" + std::to_string(*loss));
}

}  // namespace

Status load_or_train_warm_start(model::Transformer policy, const Task& task,
                                const WarmStartOptions& options, const std::string& path,
                                bool* trained,
                                const std::function<void(int64_t, double)>& progress) {
  return load_or_train(
      *policy, path, "warm start", options.steps,
      [&] { return supervised_warm_start(policy, task, options, progress); }, trained);
}

Status load_or_train_drafter_warm_start(model::Transformer policy, model::Drafter drafter,
                                        const Task& task, const WarmStartOptions& options,
                                        const std::string& path, bool* trained,
                                        const std::function<void(int64_t, double)>& progress) {
  return load_or_train(
      *drafter, path, "drafter warm start", options.steps,
      [&] { return drafter_warm_start(policy, drafter, task, options, progress); }, trained);
}

}  // namespace tlt::rl
