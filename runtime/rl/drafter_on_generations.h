// The drafter's warm start for a real target: EAGLE training on the model's own generations for
// the task, instead of teacher forcing on the task's worked solutions (rl::drafter_warm_start).
// A chat model answers in its own words, not in the worked solutions' format, so a drafter that
// imitates the solutions predicts text the model does not write; trained on what the model
// samples, it drafts what verification will accept.
//
//   1. Generate: the target answers the task's first `prompts` training problems (rendered by the
//      codec, so through the chat template when the model has one) through the rollout engine,
//      plainly, sampled at the job's temperature, `generation_batch` requests at a time, each cut
//      at max_new_tokens. The engine's hidden sink collects every committed position's token and
//      target hidden state (drafter::HiddenBuffer, as a rollout worker's buffer).
//   2. Vocabulary: with vocab_subset K > 0 the drafter's head ranges over the K tokens the model
//      generated most often (model::most_frequent_tokens; set on the drafter).
//   3. Train: `steps` optimizer steps of drafter::DrafterTrainer (the online training's loss) on
//      windows drawn from that buffer (drafter::sample_windows), `batch` windows per step.
//   4. Optionally the acceptance curve: every `curve_every` steps the drafter's greedy agreement
//      with the target's greedy answers to held-out problems (generated once, before step 1),
//      level by level (drafter::AcceptanceCurve).
//
// Progress goes to `log` (nullptr: silent), a line at most every `log_seconds`: answers done of
// all, tokens generated, tokens a second and the time left while generating; the step, loss,
// steps a second and time left while training. Decoding runs on the caller's LibTorch threads
// (runtime::configure_threads: the job's or bench's thread setting), which the first line names.
//
// Memory is bounded by prompts x (longest prompt + max_new_tokens) positions of C floats (64 x
// 330 x 576 floats = 49 MB for SmolLM2 at the defaults).
//
// The result (the drafter's weights and its draft vocabulary) is cached by
// load_or_train_drafter_on_generations under a key of everything that determines it.
//
// Thread safety: functions; the target and drafter must not be used by other threads meanwhile.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <string>

#include "api/status.h"
#include "runtime/drafter/curve.h"
#include "runtime/drafter/trainer.h"
#include "runtime/model/drafter.h"
#include "runtime/model/transformer.h"
#include "runtime/rl/tasks.h"
#include "runtime/rl/text.h"
#include "runtime/rollout/engine.h"

namespace tlt::rl {

// How the target samples the task's problems, as an RLJob's rollouts do.
struct TaskRequestOptions {
  int64_t max_new_tokens = 128;
  double temperature = 1.0;  // 0: greedy
  double top_p = 1.0;
  uint64_t seed = 0;      // request i samples with a seed derived from (seed, i)
  int64_t max_seq = 512;  // prompts longer than max_seq - max_new_tokens - headroom are redrawn
  // Positions past the response the engine keeps free for drafts (the largest arm's; see
  // rollout::Engine::generate). 64 fits every arm the RLJob spec allows.
  int64_t headroom = 64;
};

// Requests (ids 0..n-1) for problems first..first+n-1 of the training or held-out stream,
// rendered by `codec` (the chat template when it has one; rl::fitting_problem redraws prompts
// that do not fit), stopping on the codec's end ids. Errors of fitting_problem.
StatusOr<std::vector<rollout::Request>> task_requests(const Task& task, const Codec& codec,
                                                      uint64_t first, int64_t n, bool held_out,
                                                      const TaskRequestOptions& options);

struct GenerationsWarmStartOptions {
  int64_t steps = 200;  // drafter optimizer steps (spec.drafter.warmStartSteps)
  int64_t batch = 16;   // windows of 64 positions per step
  double learning_rate = 1e-3;
  uint64_t seed = 0;             // the requests' sampling seeds, the window draws and torch's RNG
  int64_t prompts = 64;          // training problems 0..prompts-1 are answered
  int64_t max_new_tokens = 128;  // each generation is cut here
  double temperature = 1.0;      // the job's sampling (0: greedy)
  double top_p = 1.0;
  int64_t generation_batch = 16;  // requests decoded at once
  int64_t vocab_subset = 0;       // K most generated tokens for the draft head; 0: all
  // Drafting levels the loss unrolls (drafter::DrafterTrainer; 1: the target's features only).
  int64_t train_levels = 1;
  // Positions the generating engine holds per request (prompt + response + a little headroom);
  // problems whose prompt does not fit are replaced as rl::fitting_problem does.
  int64_t max_seq = 512;
  // Generate as the rollouts will decode, with bfloat16 products (rollout::EngineOptions::
  // bfloat16): the drafter then learns the target features it will be given.
  bool bfloat16 = false;
  // Train with bfloat16 matrix products (drafter::DrafterTrainer's `bfloat16`: float32 weights and
  // optimizer state), as the job's spot trainers do under the same spec.model.dtype.
  bool train_bfloat16 = false;
  // How prompts become ids (borrowed; must outlive the call); nullptr: the ASCII codec.
  const Codec* codec = nullptr;

  // Neither changes the drafter trained (the evaluations draw no random numbers and leave the
  // drafter's weights and modes as they were), so neither is part of key().
  // Progress lines (without a trailing newline); nullptr: none.
  std::function<void(const std::string&)> log;
  double log_seconds = 5.0;  // at most one line per phase this often (0: every event)
  // The acceptance curve: every curve_every training steps (and before step 1 and after the
  // last) the greedy agreement over curve_levels levels on the target's greedy answers to
  // held-out problems curve_first..curve_first+curve_problems-1; 0: no curve.
  int64_t curve_every = 0;
  int64_t curve_problems = 16;
  int64_t curve_levels = 4;
  uint64_t curve_first = 1000;

  // InvalidArgument naming the field when a value cannot work.
  Status validate() const;
  // Every option that changes the result, as text (the codec is the model's: callers key on it).
  std::string key() const;
};

struct GenerationsWarmStart {
  double loss_first = 0;          // the drafter loss over the first 10 steps (mean)
  double loss_last = 0;           // ... and over the last 10
  int64_t generated_tokens = 0;   // tokens the target generated (positions trained on)
  torch::Tensor draft_vocab;      // (K) int64 the drafter drafts over; undefined: all
  bool trained = false;           // trained now (false: loaded from the cache)
  std::string cache_path;         // the cache file ("" when not cached)
  double generation_seconds = 0;  // step 1's wall time (0 when loaded)
  double training_seconds = 0;    // step 3's (the curve's evaluations excluded)
  int threads = 0;                // LibTorch threads it ran on
  // Step 4's points in step order (empty without curve_every); a cached warm start keeps the
  // curve it was trained with.
  drafter::AcceptanceCurve curve;
};

// Steps 1-4 above on `drafter` (trained in place; its draft vocabulary set when vocab_subset > 0).
// `target` is only read. `progress(step, loss)` after every training step when set. Errors:
// the options' validate(), the codec's, the engine's (Internal), FailedPrecondition when a
// prompt cannot fit max_seq.
StatusOr<GenerationsWarmStart> drafter_warm_start_on_generations(
    model::Transformer target, model::Drafter drafter, const Task& task,
    const GenerationsWarmStartOptions& options,
    const std::function<void(int64_t, double)>& progress = {});

// How well `drafter` drafts the target's greedy answers to held-out problems first..first+n-1 of
// `task` (rendered by `codec`; nullptr: ASCII), each cut at max_new_tokens: the target answers them
// plainly and greedily through the rollout engine, and drafter::greedy_agreement runs over every
// answer whole, `levels` levels. Errors of the requests and the engine.
StatusOr<drafter::LevelAgreement> held_out_agreement(model::Transformer target,
                                                     model::Drafter drafter, const Task& task,
                                                     const Codec* codec, uint64_t first, int64_t n,
                                                     int64_t max_new_tokens, int64_t max_seq,
                                                     int64_t levels, bool bfloat16 = false);

// Loads the warm start from the cache, or trains it and saves it there. The cache file is
// cache_dir/drafter/generations-<hash>.ckpt, the hash over `model_key` (what identifies the
// target's weights: model::model_identity of its file, plus its own warm start if any), `task_key`
// (task name and seed), the drafter's layer count and options.key(). A file that exists but does
// not load (truncated, another shape, another key) is an error naming the file and the fix (delete
// it); it is never silently retrained. The cache file holds the drafter and its draft vocabulary,
// and its metadata the losses, the token count and the curve; a load logs the file and that curve.
// cache_dir is the caller's (data::cache_root(): $TLT_CACHE, else ~/.cache/tlt).
StatusOr<GenerationsWarmStart> load_or_train_drafter_on_generations(
    model::Transformer target, model::Drafter drafter, const Task& task,
    const GenerationsWarmStartOptions& options, const std::string& model_key,
    const std::string& task_key, const std::string& cache_dir,
    const std::function<void(int64_t, double)>& progress = {});

}  // namespace tlt::rl
