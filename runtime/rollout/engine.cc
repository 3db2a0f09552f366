// Rollout engine: batching, the plain step, and the speculative step's verify and commit. The
// drafts come from the arms' sources (runtime/rollout/draft_source.h); a request's state and its
// invariant are runtime/rollout/active_request.h's.
//
// Shapes: B batch, P padded prompt, N verified tokens per request, V vocabulary, C model dim.
#include "runtime/rollout/engine.h"

#include <algorithm>
#include <cmath>

#include "runtime/model/bfloat16_probe.h"
#include "runtime/model/precision.h"
#include "runtime/rollout/active_request.h"
#include "runtime/rollout/batch_util.h"
#include "runtime/rollout/copied_drafts.h"
#include "runtime/rollout/draft_source.h"
#include "runtime/rollout/drafter_context.h"
#include "runtime/rollout/phase_clock.h"
#ifdef TLT_GPU
#include "runtime/rollout/cuda_graph_pool.h"
#endif

namespace tlt::rollout {

namespace {

using api::kNgramDepth;  // the longest draft of the plain "ngram" arm
// Padded prompt tokens of one batched prefill forward: 64 short prompts at once, long ones in
// smaller groups (attention's cost grows with the square of the padded length).
constexpr int64_t kPrefillTokens = 4096;

double now_seconds() {
  return phase_now_seconds();
}

int64_t pick(const float* row, int64_t vocab, const SamplingParams& params, Rng& rng) {
  if (params.greedy()) return argmax(row, vocab);
  return sample(sampling_probs(row, vocab, params), rng);
}

DraftSettings draft_settings(const EngineOptions& o) {
  return DraftSettings{o.reproducible, o.coupled_drafts, o.coupling_noise, o.draft_confidence};
}

}  // namespace

StatusOr<std::unique_ptr<Engine>> Engine::create(model::Transformer target, model::Drafter drafter,
                                                 EngineOptions options) {
  std::vector<NamedArm> arms;
  for (const std::string& name : options.arms) {
    NamedArm a{name, {}};
    std::string why;
    if (!api::parse_arm(name, &a.arm, &why)) {
      return Status::InvalidArgument("arm \"" + name + "\": " + why);
    }
    bool needs_drafter =
        make_draft_source(a.arm, nullptr, draft_settings(options))->needs_drafter();
    if (needs_drafter && drafter.is_empty()) continue;  // needs a drafter we do not have
    arms.push_back(a);
  }
  if (options.selector != "bucketed-epsilon-greedy" && options.selector != "fixed") {
    return Status::InvalidArgument("selector \"" + options.selector +
                                   "\": use bucketed-epsilon-greedy or fixed");
  }
  ArmSelector::Value value;
  if (!ArmSelector::parse_value(options.selector_value, &value)) {
    return Status::InvalidArgument("selector value \"" + options.selector_value +
                                   "\": use throughput or median");
  }
  ArmSelector::Explore explore;
  if (!ArmSelector::parse_explore(options.selector_exploration, &explore)) {
    return Status::InvalidArgument("selector exploration \"" + options.selector_exploration +
                                   "\": use uniform or weighted");
  }
  if (options.max_batch < 1 || options.max_seq < 2) {
    return Status::InvalidArgument("max_batch must be >= 1 and max_seq >= 2");
  }
  if (!(options.coupling_noise > 0.0) || !std::isfinite(options.coupling_noise)) {
    return Status::InvalidArgument("coupling_noise must be a positive number (1 by default)");
  }
  if (options.max_seq > target->config().max_seq) {
    return Status::InvalidArgument("max_seq " + std::to_string(options.max_seq) +
                                   " exceeds the model's " +
                                   std::to_string(target->config().max_seq));
  }
  return std::unique_ptr<Engine>(
      new Engine(std::move(target), std::move(drafter), std::move(options), std::move(arms)));
}

Engine::Engine(model::Transformer target, model::Drafter drafter, EngineOptions options,
               std::vector<NamedArm> arms)
    : target_(std::move(target)), options_(std::move(options)), arms_(std::move(arms)) {
  bool fixed = options_.selector == "fixed";
  int32_t n = std::max<int32_t>(1, int32_t(arms_.size())) + (!fixed && options_.plain_arm ? 1 : 0);
  // With copied drafts the bandit keeps separate statistics for steps where most requests can
  // copy (a repeating stretch) and the rest: the best arm differs between the two.
  int32_t contexts = options_.ngram_shortcut > 0 ? 2 : 1;
  ArmSelector::Options selector;
  selector.buckets = options_.buckets;
  selector.n_arms = n;
  selector.epsilon = fixed ? 0.0 : options_.epsilon;
  selector.window = options_.window;
  selector.seed = options_.seed;
  selector.contexts = contexts;
  ArmSelector::parse_value(options_.selector_value, &selector.value);  // create() checked it
  ArmSelector::parse_explore(options_.selector_exploration, &selector.explore);
  selector.reference = !fixed && options_.plain_arm && options_.plain_floor ? n - 1 : -1;
  selector_ = std::make_unique<ArmSelector>(std::move(selector));
  cache_tgt_ = target_->make_cache(options_.max_batch, options_.max_seq);
  if (!drafter.is_empty()) {
    drafter_ctx_ = std::make_unique<DrafterContext>(
        std::move(drafter), options_.max_batch, options_.max_seq, target_->feature_width(),
        target_->lm_head->weight.options(), options_.drafter_catch_up_limit, &stats_);
  }
  for (const NamedArm& a : arms_)
    sources_.push_back(make_draft_source(a.arm, drafter_ctx_.get(), draft_settings(options_)));
#ifdef TLT_GPU
  if (options_.cuda_graphs && target_->lm_head->weight.is_cuda()) {
    graphs_ = std::make_shared<CudaGraphPool>(target_, cache_tgt_.get());
    if (drafter_ctx_) drafter_ctx_->use_graphs(graphs_->draft_recorder(), options_.max_batch);
  }
#endif
  reset_stats();
}

Engine::~Engine() = default;

std::vector<std::pair<std::string, double>> EnginePhases::named(double total) const {
  return {{"prefill", prefill},   {"plain", plain},   {"draft", draft},
          {"catch_up", catch_up}, {"verify", verify}, {"commit", commit},
          {"capture", capture},   {"select", select}, {"other", total - sum()}};
}

void Engine::reset_stats() {
  stats_ = EngineStats();
  stats_.arm_steps.assign(arms_.size(), 0);
  stats_.arm_accepted.assign(arms_.size(), 0);
  stats_.arm_request_steps.assign(arms_.size(), 0);
}

StatusOr<std::vector<Completion>> Engine::generate(const std::vector<Request>& requests) {
  // The most cache entries past its committed tokens a step writes for a request: the verified
  // draft in the target's, a tree's top_k nodes per expanded level in the drafter's.
  int64_t headroom = 2;
  for (const auto& source : sources_) headroom = std::max<int64_t>(headroom, source->headroom());
  if (!arms_.empty()) headroom = std::max<int64_t>(headroom, kNgramDepth + 2);
  for (const Request& r : requests) {
    if (r.prompt.empty())
      return Status::InvalidArgument("request " + std::to_string(r.id) + ": empty prompt");
    if (int64_t(r.prompt.size()) + r.max_new_tokens + headroom > options_.max_seq) {
      return Status::InvalidArgument(
          "request " + std::to_string(r.id) + ": prompt (" + std::to_string(r.prompt.size()) +
          ") + max_new_tokens (" + std::to_string(r.max_new_tokens) + ") + draft headroom (" +
          std::to_string(headroom) + ") exceeds max_seq " + std::to_string(options_.max_seq));
    }
  }
  try {
    return run_all(requests);
  } catch (const c10::Error& e) {
    return Status::Internal(std::string("rollout engine: ") + e.what_without_backtrace());
  } catch (const std::exception& e) {
    return Status::Internal(std::string("rollout engine: ") + e.what());
  }
}

StatusOr<std::vector<Completion>> Engine::run_all(const std::vector<Request>& requests) {
  torch::NoGradGuard no_grad;
  model::DecodePrecision precision;
  if (options_.bfloat16) precision = model::bfloat16_decode_precision(target_);
  stats_.bfloat16_rows = precision.rows, stats_.precision = precision.reason;
  stats_.bfloat16 = stats_.bfloat16_rows > 0;
  // On the CPU each call makes its own copies; elsewhere they keep their storage for the graphs.
  const bool cpu = target_->lm_head->weight.device().is_cpu();
  if (stats_.bfloat16 && !cpu) bfloat16_weights_.refresh(*target_);
  model::Bfloat16Inference bfloat16(stats_.bfloat16, stats_.bfloat16_rows,
                                    cpu ? nullptr : &bfloat16_weights_);
  double start = now_seconds();
  std::vector<Completion> out(requests.size());
  std::vector<ActiveRequest> active;
  size_t next = 0;
  while (next < requests.size() || !active.empty()) {
    if (next < requests.size() && int64_t(active.size()) < options_.max_batch) {
      TLT_RETURN_IF_ERROR(admit_waiting(requests, &next, &active));
      retire(active, &out);
      continue;  // a request done at its first token may have freed a slot
    }
    if (active.empty()) continue;
    step(active);
    retire(active, &out);
  }
  stats_.seconds += now_seconds() - start;
  return out;
}

// Every request that fits joins now, prefilled in groups of at most kPrefillTokens padded tokens
// (one request alone may exceed it).
Status Engine::admit_waiting(const std::vector<Request>& requests, size_t* next,
                             std::vector<ActiveRequest>* active) {
  size_t free = size_t(options_.max_batch) - active->size();
  size_t end = std::min(requests.size(), *next + free);
  while (*next < end) {
    size_t n = 1, longest = requests[*next].prompt.size();
    while (*next + n < end) {
      size_t l = std::max(longest, requests[*next + n].prompt.size());
      if (int64_t((n + 1) * l) > kPrefillTokens) break;
      longest = l, ++n;
    }
    TLT_RETURN_IF_ERROR(admit(requests, *next, n, active));
    *next += n;
  }
  return Status::Ok();
}

// Plain while the batch is above the activation threshold; below it, the bandit picks an arm
// (or its own "plain" arm) for the batch size and whether most requests can copy a draft.
void Engine::step(std::vector<ActiveRequest>& active) {
  PhaseClock clock(&stats_.phases.select, &stats_.phases);  // what the others leave
  int64_t b = int64_t(active.size());
  if (!options_.speculative || arms_.empty() || b > options_.activation_threshold)
    return plain_step(active);
  int32_t longest = 0;  // the most any drafter arm verifies beyond the pending token
  for (size_t i = 0; i < arms_.size(); ++i)
    if (sources_[i]->needs_drafter()) longest = std::max(longest, arms_[i].arm.verify_tokens - 1);
  std::vector<std::vector<int64_t>> copies =
      copyable_drafts(active, options_.ngram_shortcut, longest);
  size_t copyable = 0;
  for (const auto& c : copies) copyable += c.empty() ? 0 : 1;
  int32_t context = selector_->contexts() > 1 && 2 * copyable >= active.size() ? 1 : 0;
  int32_t arm = selector_->choose(b, context);
  if (arm < int32_t(arms_.size())) return spec_step(active, arm, context, std::move(copies));
  int64_t before = stats_.tokens;  // the bandit's "plain" arm
  double t0 = now_seconds();
  plain_step(active);
  ++stats_.plain_chosen;
  selector_->report_step(b, arm, double(stats_.tokens - before), now_seconds() - t0, context);
}

// Prefills requests [first, first + n) together: prompts padded to the longest, each slot
// committing only its own prompt (padding lands past the committed length, never attended to).
// With share_prompts each distinct prompt runs once; the requests that repeat one take slots
// after the distinct ones and copy their keys and values.
Status Engine::admit(const std::vector<Request>& requests, size_t first, size_t n,
                     std::vector<ActiveRequest>* active) {
  PhaseClock clock(&stats_.phases.prefill, &stats_.phases);
  std::vector<size_t> rows;       // offsets in [0, n) of the requests whose prompt runs
  std::vector<size_t> source(n);  // per request: the row it takes its prefill from
  for (size_t i = 0; i < n; ++i) {
    const std::vector<int64_t>& prompt = requests[first + i].prompt;
    size_t r = 0;
    while (r < rows.size() &&
           !(options_.share_prompts && requests[first + rows[r]].prompt == prompt))
      ++r;
    if (r == rows.size()) rows.push_back(i);
    source[i] = r;
  }
  std::vector<size_t> placed = rows;  // offsets in slot order: the rows, then the repeats
  for (size_t i = 0; i < n; ++i)
    if (rows[source[i]] != i) placed.push_back(i);
  int64_t b = int64_t(rows.size()), p_max = 1;
  for (size_t i : rows)
    p_max = std::max<int64_t>(p_max, int64_t(requests[first + i].prompt.size()));
  std::vector<int64_t> toks(size_t(b * p_max), 0), last(static_cast<size_t>(b));
  for (int64_t r = 0; r < b; ++r) {
    const std::vector<int64_t>& prompt = requests[first + rows[size_t(r)]].prompt;
    std::copy(prompt.begin(), prompt.end(), toks.begin() + r * p_max);
    last[size_t(r)] = int64_t(prompt.size()) - 1;
  }
  int64_t slot0 = int64_t(active->size());
  for (size_t i = 0; i < n; ++i) {
    cache_tgt_->add_slot();
    if (drafter_ctx_) drafter_ctx_->add_slot();
  }
  torch::Device dev = target_->lm_head->weight.device();
  torch::Tensor positions = torch::arange(p_max, torch::kInt64).repeat({b, 1}).to(dev);  // (b, P)
  cache_tgt_->focus(slot0, b);
  model::ForwardResult r =
      target_->forward(long_tensor(toks, dev).view({b, p_max}), positions, cache_tgt_.get());
  cache_tgt_->unfocus();
  stats_.prefill_positions += b * p_max;
  torch::Tensor at = long_tensor(last, dev).view({b, 1, 1});
  torch::Tensor logits =
      host_logits(r.logits.gather(1, at.expand({b, 1, r.logits.size(2)})).squeeze(1));  // (b, V)
  int64_t v = logits.size(1);
  for (size_t k = 0; k < n; ++k) {
    size_t i = placed[k], row = source[i];
    const Request& request = requests[first + i];
    int64_t p = int64_t(request.prompt.size()), slot = slot0 + int64_t(k);
    if (k >= rows.size()) cache_tgt_->copy_positions(slot0 + int64_t(row), slot, p);
    cache_tgt_->commit_prefix(slot, p);
    ActiveRequest a{request, Rng(request.seed), request.prompt, 0, false, false, {}, 0, 0, 0, 0, 0};
    int64_t t = pick(logits.data_ptr<float>() + int64_t(row) * v, v, request.sampling, a.rng);
    a.order = first + i;
    active->push_back(std::move(a));
    emit(active->back(), 0, {t}, r.drafter_features()[int64_t(row)].narrow(0, 0, p));
  }
  return Status::Ok();
}

// Appends generated tokens (stopping at the stop token or the budget) and records the target
// hidden states (n, C) of the n positions starting at `first_pos` that just became committed.
void Engine::emit(ActiveRequest& a, int64_t first_pos, const std::vector<int64_t>& new_tokens,
                  const torch::Tensor& hidden) {
  for (int64_t t : new_tokens) {
    if (a.done) break;
    a.tokens.push_back(t);
    ++a.generated;
    ++stats_.tokens;
    const std::vector<int64_t>& more = a.req.more_stop_tokens;
    if (t == a.req.stop_token || std::find(more.begin(), more.end(), t) != more.end()) {
      a.done = a.stopped = true;
    }
    if (a.generated >= a.req.max_new_tokens) a.done = true;
  }
  PhaseClock clock(&stats_.phases.capture, &stats_.phases);
  if (drafter_ctx_ && !a.done) drafter_ctx_->record(a, hidden);
  if (sink_) {
    int64_t n = std::min<int64_t>(hidden.size(0), int64_t(a.tokens.size()) - first_pos);
    std::vector<int64_t> toks(a.tokens.begin() + first_pos, a.tokens.begin() + first_pos + n);
    sink_(a.req.id, toks, n == hidden.size(0) ? hidden : hidden.narrow(0, 0, n));
  }
}

void Engine::retire(std::vector<ActiveRequest>& active, std::vector<Completion>* out) {
  for (int64_t i = int64_t(active.size()) - 1; i >= 0; --i) {
    if (!active[i].done) continue;
    ActiveRequest& a = active[i];
    Completion& c = (*out)[a.order];
    c.id = a.req.id;
    c.tokens.assign(a.tokens.begin() + a.req.prompt.size(), a.tokens.end());
    c.stopped = a.stopped;
    c.spec_steps = a.spec_steps;
    c.accepted = a.accepted;
    for (auto& source : sources_) source->observe_finished(a.req.prompt, c.tokens);
    if (completion_sink_) completion_sink_(c);
    cache_tgt_->remove_slot(i);
    if (drafter_ctx_) drafter_ctx_->remove_slot(i);
    if (i != int64_t(active.size()) - 1) active[i] = std::move(active.back());
    active.pop_back();
  }
}

void Engine::plain_step(std::vector<ActiveRequest>& active) {
  PhaseClock clock(&stats_.phases.plain, &stats_.phases);
  ++stats_.plain_steps;
  int64_t b = int64_t(active.size());
  torch::Device dev = target_->lm_head->weight.device();
  std::vector<int64_t> toks(b), pos(b);
  for (int64_t i = 0; i < b; ++i) toks[i] = active[i].pending(), pos[i] = active[i].committed();
  torch::Tensor tokens = long_tensor(toks, dev).view({b, 1});    // (B, 1)
  torch::Tensor positions = long_tensor(pos, dev).view({b, 1});  // (B, 1)
  model::ForwardResult r = target_forward(tokens, positions, {});
  // Replayed outputs are the graph's static buffers: copy the hidden states, which the drafter's
  // context keeps past the next replay.
  torch::Tensor feats = r.drafter_features();  // (B, 1, C or 3C)
  if (graphs_) feats = feats.clone();
  torch::Tensor logits = host_logits(r.logits);  // (B, 1, V)
  int64_t v = logits.size(2);
  for (int64_t i = 0; i < b; ++i) {
    cache_tgt_->commit_prefix(i, 1);
    int64_t t = pick(logits.data_ptr<float>() + i * v, v, active[i].req.sampling, active[i].rng);
    emit(active[i], pos[i], {t}, feats[i]);
  }
}

// The target's forward over (B, N) tokens with their tree layout (undefined: causal, as a plain
// step's N = 1): replayed from a CUDA graph when the engine has them, else eager.
model::ForwardResult Engine::target_forward(const torch::Tensor& tokens,
                                            const torch::Tensor& positions,
                                            const model::AttentionLayout& layout) {
#ifdef TLT_GPU
  if (graphs_) {
    ++stats_.graph_replays;
    int64_t b = tokens.size(0), n = tokens.size(1);
    torch::Tensor tree =
        layout.tree.defined()
            ? layout.tree
            : torch::ones({n, n}, torch::dtype(torch::kBool).device(tokens.device()))
                  .tril()
                  .expand({b, n, n});  // (B, N, N)
    return graphs_->forward(tokens, positions, tree);
  }
#endif
  return target_->forward(tokens, positions, cache_tgt_.get(), layout);
}

// Select (step()), propose, verify, accept, commit.
void Engine::spec_step(std::vector<ActiveRequest>& active, int32_t arm, int32_t context,
                       std::vector<std::vector<int64_t>> copies) {
  double start = now_seconds();
  int64_t b = int64_t(active.size());
  std::vector<Draft> drafts = propose(active, arm, std::move(copies));
  model::ForwardResult verified;
  int32_t n = verify(active, drafts, arms_[arm].arm, &verified);
  int64_t emitted = accept_and_commit(active, drafts, verified, n, arm);
  ++stats_.spec_steps;
  stats_.request_spec_steps += b;
  ++stats_.arm_steps[arm];
  stats_.arm_request_steps[arm] += b;
  selector_->report_step(b, arm, double(emitted), now_seconds() - start, context);
}

std::vector<Draft> Engine::propose(std::vector<ActiveRequest>& active, int32_t arm,
                                   std::vector<std::vector<int64_t>> copies) {
  // The drafter runs in float32, as it trains: bfloat16 products made it no cheaper to matter and
  // its drafts are never what makes the output (verification is).
  model::Float32Products drafter_in_float32;
  PhaseClock clock(&stats_.phases.draft, &stats_.phases);
  DraftSource& source = *sources_[arm];
  if (!source.needs_drafter()) return source.propose(active);
  // A drafter arm takes each copyable draft up to its own verified-token count; the drafter
  // runs only when some request has none.
  int64_t n_copied = fit_copies(&copies, arms_[arm].arm.verify_tokens - 1);
  stats_.copied_drafts += n_copied;
  std::vector<Draft> drafts;
  if (n_copied < int64_t(active.size())) drafts = source.propose(active);
  overlay_copies(active, copies, &drafts);
  return drafts;
}

// One target forward over every request's draft, padded to the largest; with CUDA graphs, to the
// arm's verified-token count, so that every step of the arm has one shape.
int32_t Engine::verify(const std::vector<ActiveRequest>& active, const std::vector<Draft>& drafts,
                       const api::Arm& arm, model::ForwardResult* result) {
  PhaseClock clock(&stats_.phases.verify, &stats_.phases);
  int64_t b = int64_t(active.size());
  torch::Device dev = target_->lm_head->weight.device();
  int32_t n = 1;
  int64_t real_tokens = 0;
  for (const Draft& d : drafts) n = std::max(n, d.tree.size()), real_tokens += d.tree.size();
  stats_.drafted += real_tokens - b;
  if (graphs_) n = std::max(n, arm.verify_tokens);  // an n-gram arm verifies depth + 1
  std::vector<int64_t> toks(b * n, 0), pos(b * n, 0);
  std::vector<uint8_t> mask_bytes(size_t(b) * n * n, 0);
  for (int64_t i = 0; i < b; ++i) {
    const DraftTree& tree = drafts[i].tree;
    std::vector<uint8_t> m = tree.ancestor_mask();
    int32_t ni = tree.size();
    uint8_t* mi = mask_bytes.data() + size_t(i) * n * n;
    for (int32_t r = 0; r < n; ++r) {
      toks[i * n + r] = r < ni ? tree.node(r).token : 0;
      pos[i * n + r] = active[i].committed() + (r < ni ? tree.node(r).depth : 0);
      if (r >= ni) mi[size_t(r) * n + r] = 1;  // padding sees the prefix and itself only
      for (int32_t c = 0; c < ni && r < ni; ++c) mi[size_t(r) * n + c] = m[size_t(r) * ni + c];
    }
  }
  model::AttentionLayout layout;
  layout.tree = torch::from_blob(mask_bytes.data(), {b, n, n}, torch::kUInt8)
                    .to(torch::kBool)
                    .to(dev);  // (B, N, N)
  // Padded by a quarter or more: the matmuls run on the real tokens only (below that the
  // gathers cost about what they save on small models).
  if (!graphs_ && 4 * real_tokens <= 3 * b * n) {
    std::vector<int64_t> rows;
    rows.reserve(size_t(real_tokens));
    for (int64_t i = 0; i < b; ++i)
      for (int32_t r = 0; r < drafts[i].tree.size(); ++r) rows.push_back(i * n + r);
    layout.rows = long_tensor(rows, dev);
  }
  *result = target_forward(long_tensor(toks, dev).view({b, n}), long_tensor(pos, dev).view({b, n}),
                           layout);
  return n;
}

int64_t Engine::accept_and_commit(std::vector<ActiveRequest>& active,
                                  const std::vector<Draft>& drafts,
                                  const model::ForwardResult& verified, int32_t n, int32_t arm) {
  PhaseClock clock(&stats_.phases.commit, &stats_.phases);
  torch::Device dev = target_->lm_head->weight.device();
  torch::Tensor logits = host_logits(verified.logits);  // (B, N, V)
  int64_t v = logits.size(2), emitted = 0;
  for (int64_t i = 0; i < int64_t(active.size()); ++i) {
    ActiveRequest& a = active[i];
    const Draft& d = drafts[i];
    NodeLogits nl{logits.data_ptr<float>() + i * n * v, v};
    Verdict verdict;
    if (a.req.sampling.greedy()) {
      verdict = accept_greedy(d.tree, nl);
    } else if (d.sampled) {
      verdict = options_.chain_rule(d.tree, nl, d.q, a.req.sampling, a.rng);
    } else {
      verdict = options_.tree_rule(d.tree, nl, a.req.sampling, a.rng);
    }
    std::vector<int64_t> path(verdict.path.begin(), verdict.path.end());
    cache_tgt_->commit(i, path);
    std::vector<int64_t> new_tokens;
    for (size_t j = 1; j < path.size(); ++j)
      new_tokens.push_back(d.tree.node(int32_t(path[j])).token);
    new_tokens.push_back(verdict.next_token);
    a.spec_steps++;
    a.accepted += verdict.accepted();
    stats_.accepted += verdict.accepted();
    stats_.arm_accepted[arm] += verdict.accepted();
    emitted += int64_t(new_tokens.size());
    torch::Tensor hid =  // (a+1, C or 3C)
        verified.drafter_features()[i].index_select(0, long_tensor(path, dev));
    emit(a, a.committed(), new_tokens, hid);  // rows start at the old pending token
  }
  return emitted;
}

}  // namespace tlt::rollout
