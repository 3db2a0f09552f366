// The rollout engine: batched generation with continuous batching and lossless, adaptive
// speculative decoding.
//
// Requests join the running batch as slots free up and leave as they finish. While more than
// `activation_threshold` requests are active the engine decodes plainly (one target forward per
// token for the whole batch). At or below it, in the long tail, each step drafts with the arm the
// bandit picks for the current batch size (EAGLE chain, EAGLE tree, n-gram or history: one draft
// source per arm, runtime/rollout/draft_source.h), verifies every request's draft in one target
// forward, and commits what the acceptance rule keeps (see runtime/rollout/speculative.h). Output
// is lossless: greedy requests produce exactly the tokens of plain greedy decoding; sampled
// requests follow exactly the plain sampling distribution.
//
// Every committed position's final hidden state and token can be handed to a sink (the
// drafter's training buffer) through `on_hidden`.
//
// Thread safety: one thread drives an Engine. The target and drafter modules must not be
// modified while generate() runs (weights are updated between calls).
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "api/arm.h"
#include "api/status.h"
#include "runtime/model/drafter.h"
#include "runtime/model/precision.h"
#include "runtime/model/transformer.h"
#include "runtime/rollout/sampling.h"
#include "runtime/rollout/selector.h"
#include "runtime/rollout/speculative.h"

namespace tlt::rollout {

struct Request {
  int64_t id = 0;
  std::vector<int64_t> prompt;  // at least one token
  int32_t max_new_tokens = 64;
  int64_t stop_token = -1;  // -1: none
  // A real model's other end tokens (<|im_end|>, <|endoftext|>, ...).
  std::vector<int64_t> more_stop_tokens;
  SamplingParams sampling;  // temperature 0: greedy
  uint64_t seed = 0;        // per-request RNG seed
};

struct Completion {
  int64_t id = 0;
  std::vector<int64_t> tokens;  // generated tokens (the stop token included when hit)
  bool stopped = false;         // ended on the stop token
  int64_t spec_steps = 0;       // speculative steps this request took part in
  int64_t accepted = 0;         // drafted tokens accepted over those steps
};

struct NamedArm {
  std::string name;  // "8_4_48", "ngram"
  api::Arm arm;
};

struct EngineOptions {
  int64_t max_batch = 64;
  int64_t max_seq = 1024;
  bool speculative = true;
  int64_t activation_threshold = 32;
  std::vector<std::string> arms{"4_1_5", "6_2_8", "ngram"};
  std::string selector = "bucketed-epsilon-greedy";  // or "fixed" (always the first arm)
  std::vector<int32_t> buckets{1, 2, 5, 21};
  double epsilon = 0.1;
  int32_t window = 32;
  // How an arm's last `window` steps are valued: "throughput" or "median" (ArmSelector::Value).
  std::string selector_value = "throughput";
  // Which arm an exploration step picks: "uniform" or "weighted" (ArmSelector::Explore).
  std::string selector_exploration = "uniform";
  uint64_t seed = 0;
  // With the bandit, "decode plainly" is one more arm below the threshold, so the engine can
  // learn that speculation does not pay at some batch size.
  bool plain_arm = true;
  // With the plain arm: the bandit keeps a floor under plain decoding (ArmSelector's reference
  // arm, selector.h): plain is tried first, an arm whose confidence interval lies below another's
  // is ruled out and hardly explored again, and an arm within the noise of plain decoding does
  // not displace it. false: plain is one more epsilon-greedy arm.
  bool plain_floor = true;
  // Sampled requests: draft chains with the drafter's top-1 and verify by sampling from the
  // target at each node (as trees and n-grams are), instead of drafting by sampling and
  // verifying by rejection. Then a request's tokens equal plain sampling's for its seed
  // whatever the arm, batch or drafter (up to float rounding between a verify forward and a
  // one-token forward), which RL needs for restarts and resume; acceptance can be lower.
  bool reproducible = false;
  // Reproducible sampled chains: the drafter's draft at depth k is the winner of its own
  // exponential race (sampling.h) at the key the target will draw that position with (the
  // request's k-th next draw), instead of its top token. The draft then matches the target's
  // draw with probability at least (1 - TV) / (1 + TV) for the two distributions' total
  // variation distance TV, far likelier than the target drawing the drafter's top token when the
  // policy is unsure. Only the drafts change (the request's RNG is not advanced); verification
  // still samples the target, so outputs stay plain sampling's.
  bool coupled_drafts = true;
  // Sampled requests' trees (any arm with top-k > 1), under coupled_drafts: a node's children
  // are the first top-k tokens of the drafter's own race at the key the target will draw their
  // position with, not the drafter's likeliest tokens (draft_eagle_tree.cc), scored by the
  // probability that each wins the target's race when the target's log-probabilities are the
  // drafter's plus Gumbel noise of this scale. Smaller trusts the drafter more (deeper trees);
  // larger spreads the budget over more candidates. Changes drafts only, never outputs.
  double coupling_noise = 1.0;
  // The rule for chains drafted by sampling; tests swap in a wrong one to prove they notice.
  ChainRule chain_rule = accept_rejection_chain;
  // The rule for sampled requests' deterministic drafts (trees, n-gram, history, copies and
  // reproducible chains); tests swap in a wrong one to prove they notice.
  TreeRule tree_rule = accept_by_sampling;
  // Requests admitted together whose prompts are equal (a GRPO group's samples) prefill the
  // prompt once: the others copy its keys and values and draw their first token from its logits
  // with their own seeds. The same tokens as prefilling each (a forward's rows do not depend on
  // the batch: decode_attention.h), at a fraction of the prompt forwards. false: each runs.
  bool share_prompts = true;
  // Drafter arms copy a request's draft from its own context instead of running the drafter
  // when its last `ngram_shortcut` tokens (or more, up to 4) occurred before: the tokens that
  // followed then (at most the arm's verify_tokens - 1) become the draft, verified by sampling at
  // each node like any deterministic draft. A repeating stretch (a restated number, a loop) costs
  // no drafter forward and is usually right; when every request of the batch has such a match the
  // drafter does not run at all. 0 turns it off.
  int32_t ngram_shortcut = 3;
  // The most pending (target hidden state, token) pairs a request keeps for the drafter: while
  // the drafter does not run (plain steps, n-gram or copied drafts, the prompt) pairs pile up,
  // and the next drafter step would feed them all in one forward. Older ones are skipped
  // instead; the drafter then attends to the pairs it has (a gap in its context), which can
  // only change what it drafts, never what is accepted. 0 keeps every pair. 8 by default: where
  // n-gram or copied drafts stretch between drafter steps, catching up on every pair costs a
  // forward over all of them, while the pairs older than the last few hardly change the draft
  // (docs/benchmarks.md, bench/rollout's --catch-up-limit).
  int32_t drafter_catch_up_limit = 8;
  // Drafter arms verify a drafted node only when the drafter's own estimate that its whole path
  // is accepted reaches this: the product of the top probabilities along a chain, the path's
  // probability in a tree. Where a verify's cost grows with its tokens (large batches on a CPU)
  // the target then scores mostly tokens it will accept. Exact for every rule (a chain's cut
  // never looks at the token drawn). 0 verifies every drafted node.
  double draft_confidence = 0.0;
  // Decode with the target's matrix products in bfloat16 (the drafter keeps float32): activations,
  // the cache and the logits stay float32 (model::Bfloat16Inference). Lossless only where the
  // forward is row-invariant (on the CPU by runtime/model/decode_attention.h), so only after
  // model::bfloat16_decode_rows() (runtime/model/bfloat16_probe.h) found on the target's device
  // (CPU or CUDA), for this model's shapes and verify forwards of up to 64 tokens (every arm's),
  // that verify forwards and batched steps give the bits of one-token steps (with products
  // unpadded where that holds, else padded to 16 rows); otherwise the engine decodes in float32
  // (EngineStats::bfloat16 says which ran, EngineStats::precision why). Plain and speculative
  // decoding of the same options produce the same tokens either way.
  bool bfloat16 = false;
  // GPU flavour (TLT_GPU), target on CUDA: verify forwards and plain decode steps (N = 1)
  // replay CUDA graphs captured per (batch bucket, verified tokens)
  // (runtime/rollout/cuda_graph_pool.h). No effect elsewhere.
  bool cuda_graphs = true;
};

// Where generate()'s time goes, in seconds. The phases do not overlap: each second of a call
// belongs to at most one, and what none claims (batching, retiring, the loop) is other().
struct EnginePhases {
  double prefill = 0;   // admitting requests: the prompts' target forward and first token
  double plain = 0;     // plain steps: one target forward per token, sampling, cache commit
  double draft = 0;     // draft sources proposing (n-gram search, drafter steps, copies)
  double catch_up = 0;  // the drafter's forward over pairs it has not seen (EAGLE arms)
  double verify = 0;    // the target's forward over every request's draft
  double commit = 0;    // acceptance rules and committing the kept paths
  double capture = 0;   // committed hidden states queued for the drafter and the sink
  double select = 0;    // the bandit: copyable drafts, choosing an arm, recording the step
  // The phases' names and seconds in the order above, then ("other", total - their sum).
  std::vector<std::pair<std::string, double>> named(double total) const;
  double sum() const {
    return prefill + plain + draft + catch_up + verify + commit + capture + select;
  }
};

struct EngineStats {
  int64_t plain_steps = 0, spec_steps = 0;
  int64_t plain_chosen = 0;        // plain steps the bandit chose below the threshold
  int64_t tokens = 0;              // generated tokens
  int64_t prefill_positions = 0;   // positions the prefill forwards ran (padding included)
  int64_t request_spec_steps = 0;  // sum over spec steps of the batch size
  int64_t accepted = 0;            // drafted tokens accepted
  std::vector<int64_t> arm_steps;  // spec steps per arm
  std::vector<int64_t> arm_accepted, arm_request_steps;
  int64_t copied_drafts = 0;     // drafts of drafter arms copied from context (ngram_shortcut)
  int64_t catch_up_skipped = 0;  // pairs never given to the drafter (drafter_catch_up_limit)
  int64_t drafted = 0;           // drafted tokens verified (all arms; accepted <= drafted)
  int64_t graph_replays = 0;     // target forwards (verify, plain) replayed from CUDA graphs
  // Drafter forwards (levels, catch-up) replayed from CUDA graphs, and those run eagerly although
  // graphs were in use (shapes outside the recorded ones: runtime/rollout/draft_graph.h).
  int64_t draft_graph_replays = 0, draft_eager_fallbacks = 0;
  double seconds = 0.0;
  bool bfloat16 = false;  // the last generate() decoded with bfloat16 products
  // Their padding: products of fewer rows ran as this many (1: unpadded; 0: float32).
  int64_t bfloat16_rows = 0;
  // Why bfloat16 or float32 (model::bfloat16_decode_precision's reason, naming the device); ""
  // when EngineOptions::bfloat16 was off.
  std::string precision;
  EnginePhases phases;  // how `seconds` splits
  // Mean tokens emitted per request per speculative step (accepted + 1).
  double accept_length() const {
    return request_spec_steps ? double(accepted + request_spec_steps) / request_spec_steps : 0.0;
  }
};

using HiddenSink = std::function<void(int64_t request_id, const std::vector<int64_t>& tokens,
                                      const torch::Tensor& hidden)>;  // hidden (n, F)

class CudaGraphPool;   // runtime/rollout/cuda_graph_pool.h (GPU flavour only)
struct ActiveRequest;  // runtime/rollout/active_request.h
struct Draft;          // runtime/rollout/draft_source.h
class DraftSource;
class DrafterContext;  // runtime/rollout/drafter_context.h

class Engine {
 public:
  // drafter may be empty (nullptr holder): then only model-free arms (ngram) speculate.
  // InvalidArgument for an unknown arm name or selector.
  static StatusOr<std::unique_ptr<Engine>> create(model::Transformer target, model::Drafter drafter,
                                                  EngineOptions options);
  ~Engine();

  // Runs every request to completion; returns completions in the order of `requests`.
  // InvalidArgument when a request cannot fit in max_seq or has an empty prompt; Internal when
  // LibTorch fails (never throws). After an error the engine must not be reused.
  StatusOr<std::vector<Completion>> generate(const std::vector<Request>& requests);

  const EngineStats& stats() const { return stats_; }
  void reset_stats();
  const std::vector<NamedArm>& arms() const { return arms_; }
  ArmSelector& selector() { return *selector_; }
  // Called with each request's newly committed tokens and the target's drafter features (n, F) of
  // their positions (ForwardResult::drafter_features: F = C, or 3C when the target exports fused
  // features). `hidden` is the engine's own tensor (a view of a forward's output, never a
  // replayed graph's buffer) and is never written again: the sink may keep it without copying.
  void set_hidden_sink(HiddenSink sink) { sink_ = std::move(sink); }
  // Called with each request's completion the moment it finishes (before generate() returns
  // them all), on generate()'s thread; nullptr for none. The completion is also in generate()'s
  // result, identical.
  void set_completion_sink(std::function<void(const Completion&)> sink) {
    completion_sink_ = std::move(sink);
  }
  // Switches speculation on or off between generate() calls.
  void set_speculative(bool on) { options_.speculative = on; }

 private:
  Engine(model::Transformer target, model::Drafter drafter, EngineOptions options,
         std::vector<NamedArm> arms);

  // generate() after its checks; LibTorch and cache errors propagate as exceptions to it.
  StatusOr<std::vector<Completion>> run_all(const std::vector<Request>& requests);
  // Admits every request that fits while slots are free, prefilled in groups.
  Status admit_waiting(const std::vector<Request>& requests, size_t* next,
                       std::vector<ActiveRequest>* active);
  // Prefills requests [first, first + n) in one target forward and appends them to `active`.
  Status admit(const std::vector<Request>& requests, size_t first, size_t n,
               std::vector<ActiveRequest>* active);
  // One decoding step of the whole batch: plain, or speculative with the arm the bandit picks.
  void step(std::vector<ActiveRequest>& active);
  void plain_step(std::vector<ActiveRequest>& active);
  // context: the bandit's, under which the step's reward is recorded; copies: copyable_drafts().
  void spec_step(std::vector<ActiveRequest>& active, int32_t arm, int32_t context,
                 std::vector<std::vector<int64_t>> copies);
  // The arm's drafts: its source's, with copied drafts standing in where a drafter arm has them.
  std::vector<Draft> propose(std::vector<ActiveRequest>& active, int32_t arm,
                             std::vector<std::vector<int64_t>> copies);
  // One target forward over every request's draft (padded to the largest); returns N.
  int32_t verify(const std::vector<ActiveRequest>& active, const std::vector<Draft>& drafts,
                 const api::Arm& arm, model::ForwardResult* result);
  // The target's forward (tokens, positions (B, N); layout.tree undefined: causal) on cache_tgt_,
  // replayed from a CUDA graph when the engine has them (plain steps and verifies alike).
  model::ForwardResult target_forward(const torch::Tensor& tokens, const torch::Tensor& positions,
                                      const model::AttentionLayout& layout);
  // Runs the acceptance rule on each request's draft against the verify forward's logits and
  // commits the kept path in the target cache; returns the tokens emitted.
  int64_t accept_and_commit(std::vector<ActiveRequest>& active, const std::vector<Draft>& drafts,
                            const model::ForwardResult& verified, int32_t n, int32_t arm);
  void emit(ActiveRequest& a, int64_t first_pos, const std::vector<int64_t>& tokens,
            const torch::Tensor& hidden);
  void retire(std::vector<ActiveRequest>& active, std::vector<Completion>* out);

  model::Transformer target_;
  EngineOptions options_;
  std::vector<NamedArm> arms_;
  std::unique_ptr<ArmSelector> selector_;
  std::unique_ptr<model::KVCache> cache_tgt_;
  // The drafter and its cache (null without a drafter); the EAGLE sources borrow it.
  std::unique_ptr<DrafterContext> drafter_ctx_;
  // sources_[i] drafts for arms_[i] (runtime/rollout/draft_source.h).
  std::vector<std::unique_ptr<DraftSource>> sources_;
  // The verify forward's CUDA graphs over cache_tgt_ (GPU flavour, target on CUDA), else null.
  // A shared_ptr only because CudaGraphPool is incomplete in the CPU flavour, where it stays null.
  std::shared_ptr<CudaGraphPool> graphs_;
  // The target's bfloat16 weight copies off the CPU: they keep their storage from one generate()
  // to the next, since graphs_ replays read them in place; refreshed at each call.
  model::Bfloat16Weights bfloat16_weights_;
  HiddenSink sink_;
  std::function<void(const Completion&)> completion_sink_;
  EngineStats stats_;
};

}  // namespace tlt::rollout
