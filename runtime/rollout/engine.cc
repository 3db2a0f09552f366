// Rollout engine. Per-request invariant: the target cache holds tokens[0, L) with
// L = tokens.size() - 1; tokens[L] is the pending token (chosen, not yet run through the
// target). The drafter has been given pairs j < drafter_len (pair j = (h_j, t_{j+1})) at
// position j; its cache holds drafter_cached <= drafter_len of them (fewer when a catch-up
// skipped old pairs under drafter_catch_up_limit). `feats` holds the target hidden states of
// positions [drafter_len, L) not yet given to it.
#include "runtime/rollout/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "runtime/rollout/ngram.h"
#ifdef TLT_GPU
#include "runtime/rollout/cuda_graph_pool.h"
#endif

namespace tlt::rollout {

struct Engine::Active {
  Request req;
  Rng rng;
  std::vector<int64_t> tokens;  // prompt + generated; back() is pending
  int64_t generated = 0;
  bool done = false, stopped = false;
  std::vector<torch::Tensor> feats;  // (n_i, C) chunks for positions [drafter_len, L)
  int64_t drafter_len = 0;           // next pair's position
  int64_t drafter_cached = 0;        // drafter cache entries (the slot where speculation starts)
  int64_t spec_steps = 0, accepted = 0;
  size_t order = 0;  // index in the caller's request list

  int64_t committed() const { return static_cast<int64_t>(tokens.size()) - 1; }
  int64_t pending() const { return tokens.back(); }
};

namespace {

using api::kNgramDepth;  // the longest draft of the plain "ngram" arm
// Padded prompt tokens of one batched prefill forward: 64 short prompts at once, long ones in
// smaller groups (attention's cost grows with the square of the padded length).
constexpr int64_t kPrefillTokens = 4096;

double now_seconds() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

// Logits (B, T, V) of any dtype/device as one contiguous CPU float64 tensor.
torch::Tensor host_logits(const torch::Tensor& logits) {
  return logits.to(torch::kCPU, torch::kFloat64).contiguous();
}

// log(p), and -infinity for p = 0 (a floor on log-probabilities that lets everything through).
double log_or_minus_infinity(double p) {
  return p > 0.0 ? std::log(p) : -std::numeric_limits<double>::infinity();
}

// The softmax probability of the largest of V logits.
double top_probability(const double* row, int64_t v) {
  double m = row[argmax(row, v)], z = 0.0;
  for (int64_t j = 0; j < v; ++j) z += std::exp(row[j] - m);
  return 1.0 / z;
}

int64_t pick(const double* row, int64_t vocab, const SamplingParams& params, Rng& rng) {
  if (params.greedy()) return argmax(row, vocab);
  return sample(sampling_probs(row, vocab, params), rng);
}

torch::Tensor long_tensor(const std::vector<int64_t>& v, torch::Device device) {
  return torch::tensor(v, torch::kInt64).to(device);
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
    if (!a.arm.ngram && drafter.is_empty()) continue;  // needs a drafter we do not have
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
    : target_(std::move(target)),
      drafter_(std::move(drafter)),
      options_(std::move(options)),
      arms_(std::move(arms)) {
  bool fixed = options_.selector == "fixed";
  int32_t n = std::max<int32_t>(1, int32_t(arms_.size())) + (!fixed && options_.plain_arm ? 1 : 0);
  // With copied drafts the bandit keeps separate statistics for steps where most requests can
  // copy (a repeating stretch) and the rest: the best arm differs between the two.
  int32_t contexts = options_.ngram_shortcut > 0 ? 2 : 1;
  ArmSelector::Value value = ArmSelector::Value::kThroughput;
  ArmSelector::parse_value(options_.selector_value, &value);  // create() checked the names
  ArmSelector::Explore explore = ArmSelector::Explore::kUniform;
  ArmSelector::parse_explore(options_.selector_exploration, &explore);
  selector_ =
      std::make_unique<ArmSelector>(options_.buckets, n, fixed ? 0.0 : options_.epsilon,
                                    options_.window, options_.seed, 3, contexts, value, explore);
  cache_tgt_ = target_->make_cache(options_.max_batch, options_.max_seq);
  if (!drafter_.is_empty()) cache_dft_ = drafter_->make_cache(options_.max_batch, options_.max_seq);
#ifdef TLT_GPU
  if (options_.cuda_graphs && target_->lm_head->weight.is_cuda()) {
    graphs_ = std::make_shared<CudaGraphPool>(target_, cache_tgt_.get());
  }
#endif
  reset_stats();
}

void Engine::reset_stats() {
  stats_ = EngineStats();
  stats_.arm_steps.assign(arms_.size(), 0);
  stats_.arm_accepted.assign(arms_.size(), 0);
  stats_.arm_request_steps.assign(arms_.size(), 0);
}

StatusOr<std::vector<Completion>> Engine::generate(const std::vector<Request>& requests) {
  int64_t headroom = 2;
  for (const NamedArm& a : arms_) {
    // Target: the verified draft. Drafter: a tree commits top_k nodes per expanded level.
    int64_t need = a.arm.ngram ? a.arm.depth + 2
                               : std::max<int64_t>(a.arm.verify_tokens + 1,
                                                   int64_t(a.arm.top_k) * a.arm.depth + 2);
    headroom = std::max<int64_t>(headroom, need);
  }
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
  double start = now_seconds();
  std::vector<Completion> out(requests.size());
  std::vector<Active> active;
  size_t next = 0;
  while (next < requests.size() || !active.empty()) {
    if (next < requests.size() && int64_t(active.size()) < options_.max_batch) {
      // Every request that fits joins now, prefilled in groups of at most
      // kPrefillTokens padded tokens (one request alone may exceed it).
      size_t free = size_t(options_.max_batch) - active.size();
      size_t end = std::min(requests.size(), next + free);
      while (next < end) {
        size_t n = 1, longest = requests[next].prompt.size();
        while (next + n < end) {
          size_t l = std::max(longest, requests[next + n].prompt.size());
          if (int64_t((n + 1) * l) > kPrefillTokens) break;
          longest = l, ++n;
        }
        TLT_RETURN_IF_ERROR(admit(requests, next, n, &active));
        next += n;
      }
      retire(active, &out);
      continue;  // a request done at its first token may have freed a slot
    }
    if (active.empty()) continue;
    bool speculate = options_.speculative && !arms_.empty() &&
                     int64_t(active.size()) <= options_.activation_threshold;
    // Drafts copyable from each request's context, and the bandit's context: whether most are.
    std::vector<std::vector<int64_t>> copies =
        speculate ? copyable_drafts(active) : std::vector<std::vector<int64_t>>();
    size_t copyable = 0;
    for (const auto& c : copies) copyable += c.empty() ? 0 : 1;
    int32_t context = selector_->contexts() > 1 && 2 * copyable >= active.size() ? 1 : 0;
    int32_t arm = speculate ? selector_->choose(int64_t(active.size()), context) : -1;
    if (arm >= int32_t(arms_.size())) {  // the bandit's "plain" arm
      int64_t b = int64_t(active.size()), before = stats_.tokens;
      double t0 = now_seconds();
      plain_step(active);
      ++stats_.plain_chosen;
      selector_->report_step(b, arm, double(stats_.tokens - before), now_seconds() - t0, context);
    } else if (arm >= 0) {
      spec_step(active, arm, context, copies);
    } else {
      plain_step(active);
    }
    retire(active, &out);
  }
  stats_.seconds += now_seconds() - start;
  return out;
}

// Prefills requests [first, first + n) together: prompts padded to the longest, each slot
// committing only its own prompt (padding lands past the committed length, never attended to).
Status Engine::admit(const std::vector<Request>& requests, size_t first, size_t n,
                     std::vector<Active>* active) {
  int64_t b = int64_t(n), p_max = 1;
  for (size_t i = first; i < first + n; ++i)
    p_max = std::max<int64_t>(p_max, int64_t(requests[i].prompt.size()));
  std::vector<int64_t> toks(size_t(b * p_max), 0), last(static_cast<size_t>(b));
  for (int64_t i = 0; i < b; ++i) {
    const std::vector<int64_t>& prompt = requests[first + size_t(i)].prompt;
    std::copy(prompt.begin(), prompt.end(), toks.begin() + i * p_max);
    last[size_t(i)] = int64_t(prompt.size()) - 1;
  }
  int64_t slot0 = int64_t(active->size());
  for (int64_t i = 0; i < b; ++i) {
    cache_tgt_->add_slot();
    if (cache_dft_) cache_dft_->add_slot();
  }
  torch::Device dev = target_->lm_head->weight.device();
  torch::Tensor positions = torch::arange(p_max, torch::kInt64).repeat({b, 1}).to(dev);  // (b, P)
  cache_tgt_->focus(slot0, b);
  model::ForwardResult r =
      target_->forward(long_tensor(toks, dev).view({b, p_max}), positions, cache_tgt_.get());
  cache_tgt_->unfocus();
  torch::Tensor at = long_tensor(last, dev).view({b, 1, 1});
  torch::Tensor logits =
      host_logits(r.logits.gather(1, at.expand({b, 1, r.logits.size(2)})).squeeze(1));  // (b, V)
  int64_t v = logits.size(1);
  for (int64_t i = 0; i < b; ++i) {
    const Request& request = requests[first + size_t(i)];
    int64_t p = int64_t(request.prompt.size());
    cache_tgt_->commit_prefix(slot0 + i, p);
    Active a{request, Rng(request.seed), request.prompt, 0, false, false, {}, 0, 0, 0, 0, 0};
    int64_t t = pick(logits.data_ptr<double>() + i * v, v, request.sampling, a.rng);
    a.order = first + size_t(i);
    active->push_back(std::move(a));
    emit(active->back(), 0, {t}, r.hidden[i].narrow(0, 0, p));
  }
  return Status::Ok();
}

// Appends generated tokens (stopping at the stop token or the budget) and records the target
// hidden states (n, C) of the n positions starting at `first_pos` that just became committed.
void Engine::emit(Active& a, int64_t first_pos, const std::vector<int64_t>& new_tokens,
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
  if (cache_dft_ && !a.done) {
    a.feats.push_back(hidden);
    skip_old_pairs(a, /*when_over=*/2 * int64_t(options_.drafter_catch_up_limit));  // amortized
  }
  if (sink_) {
    int64_t n = std::min<int64_t>(hidden.size(0), int64_t(a.tokens.size()) - first_pos);
    std::vector<int64_t> toks(a.tokens.begin() + first_pos, a.tokens.begin() + first_pos + n);
    sink_(a.req.id, toks, hidden.narrow(0, 0, n));
  }
}

void Engine::retire(std::vector<Active>& active, std::vector<Completion>* out) {
  for (int64_t i = int64_t(active.size()) - 1; i >= 0; --i) {
    if (!active[i].done) continue;
    Active& a = active[i];
    Completion& c = (*out)[a.order];
    c.id = a.req.id;
    c.tokens.assign(a.tokens.begin() + a.req.prompt.size(), a.tokens.end());
    c.stopped = a.stopped;
    c.spec_steps = a.spec_steps;
    c.accepted = a.accepted;
    cache_tgt_->remove_slot(i);
    if (cache_dft_) cache_dft_->remove_slot(i);
    if (i != int64_t(active.size()) - 1) active[i] = std::move(active.back());
    active.pop_back();
  }
}

void Engine::plain_step(std::vector<Active>& active) {
  ++stats_.plain_steps;
  int64_t b = int64_t(active.size());
  torch::Device dev = target_->lm_head->weight.device();
  std::vector<int64_t> toks(b), pos(b);
  for (int64_t i = 0; i < b; ++i) toks[i] = active[i].pending(), pos[i] = active[i].committed();
  model::ForwardResult r = target_->forward(long_tensor(toks, dev).view({b, 1}),
                                            long_tensor(pos, dev).view({b, 1}), cache_tgt_.get());
  torch::Tensor logits = host_logits(r.logits);  // (B, 1, V)
  int64_t v = logits.size(2);
  for (int64_t i = 0; i < b; ++i) {
    cache_tgt_->commit_prefix(i, 1);
    int64_t t = pick(logits.data_ptr<double>() + i * v, v, active[i].req.sampling, active[i].rng);
    emit(active[i], pos[i], {t}, r.hidden[i]);
  }
}

// Under drafter_catch_up_limit, once more than `when_over` pairs are pending, drops those older
// than the newest `limit`: the drafter will never see them (positions stay absolute, so the
// later ones keep theirs).
void Engine::skip_old_pairs(Active& a, int64_t when_over) {
  int64_t limit = options_.drafter_catch_up_limit;
  int64_t pending = a.committed() - a.drafter_len;
  if (limit <= 0 || pending <= std::max(limit, when_over)) return;
  int64_t skip = pending - limit;
  a.drafter_len += skip;
  stats_.catch_up_skipped += skip;
  torch::Tensor rest = torch::cat(a.feats, 0).narrow(0, skip, limit);  // (limit, C)
  a.feats.assign(1, rest);
}

// Feeds every request's pending pairs to the drafter (ragged, padded to the longest) and
// returns the drafter's prediction of h_L for each: (B, C).
torch::Tensor Engine::drafter_catch_up(std::vector<Active>& active) {
  int64_t b = int64_t(active.size());
  int64_t c = target_->config().dim;
  torch::Device dev = target_->lm_head->weight.device();
  std::vector<int64_t> n(b);
  int64_t t = 1;
  for (int64_t i = 0; i < b; ++i) {
    skip_old_pairs(active[i], 0);
    n[i] = active[i].committed() - active[i].drafter_len;
    t = std::max(t, n[i]);
  }
  std::vector<int64_t> toks(b * t, 0), pos(b * t, 0);
  torch::Tensor feats = torch::zeros({b, t, c}, target_->lm_head->weight.options());  // (B,T,C)
  for (int64_t i = 0; i < b; ++i) {
    Active& a = active[i];
    if (n[i] > 0) feats[i].narrow(0, 0, n[i]).copy_(torch::cat(a.feats, 0));
    for (int64_t j = 0; j < t; ++j) {
      int64_t p = a.drafter_len + std::min(j, std::max<int64_t>(n[i] - 1, 0));
      toks[i * t + j] = a.tokens[p + 1];  // pair p = (h_p, t_{p+1})
      pos[i * t + j] = a.drafter_len + j;
    }
  }
  torch::Tensor out = drafter_->forward(long_tensor(toks, dev).view({b, t}), feats,
                                        long_tensor(pos, dev).view({b, t}), cache_dft_.get());
  std::vector<int64_t> last(b);
  for (int64_t i = 0; i < b; ++i) {
    cache_dft_->commit_prefix(i, n[i]);
    active[i].drafter_len += n[i];
    active[i].drafter_cached += n[i];
    active[i].feats.clear();
    last[i] = std::max<int64_t>(n[i] - 1, 0);
  }
  torch::Tensor idx = long_tensor(last, dev).view({b, 1, 1}).expand({b, 1, c});
  return out.gather(1, idx).squeeze(1);  // (B, C)
}

std::vector<DraftTree> Engine::draft_chain(std::vector<Active>& active,
                                           const torch::Tensor& root_hidden, int32_t depth,
                                           std::vector<std::vector<std::vector<double>>>* q) {
  int64_t b = int64_t(active.size());
  torch::Device dev = root_hidden.device();
  std::vector<DraftTree> trees;
  for (Active& a : active) trees.emplace_back(a.pending());
  q->assign(b, {});
  torch::Tensor h = root_hidden;  // (B, C)
  // Under draft_confidence a request's chain ends before the node at which the product of the
  // drafter's top probabilities so far would fall below it. The decision uses only the
  // distribution the node would be drawn from, never the drawn token, so sampled chains stay
  // exact under rejection sampling.
  double min_log = log_or_minus_infinity(options_.draft_confidence);
  std::vector<double> score(size_t(b), 0.0);  // log of that product
  std::vector<char> ended(size_t(b), 0);
  int64_t live = b;
  // Under coupled_drafts, the uniforms each reproducible sampled request will draw next.
  std::vector<std::vector<double>> ahead(static_cast<size_t>(b));
  for (int64_t i = 0; i < b; ++i) {
    if (active[i].req.sampling.greedy() || !options_.reproducible || !options_.coupled_drafts)
      continue;
    Rng peek = active[i].rng;  // a copy: the request's own stream is not advanced
    for (int32_t k = 0; k < depth; ++k) ahead[i].push_back(peek.uniform());
  }
  for (int32_t k = 1; k <= depth && live > 0; ++k) {
    torch::Tensor logits = host_logits(drafter_->draft_logits(h));  // (B, V)
    int64_t v = logits.size(1);
    std::vector<int64_t> toks(b), pos(b);
    for (int64_t i = 0; i < b; ++i) {
      const double* row = logits.data_ptr<double>() + i * v;
      const SamplingParams& sp = active[i].req.sampling;
      bool sampled = !sp.greedy() && !options_.reproducible;
      bool coupled = !ahead[i].empty();
      pos[i] = active[i].drafter_len + k - 1;
      toks[i] = argmax(row, v);  // what an ended chain feeds the batched forward (unused)
      if (ended[i]) continue;
      std::vector<double> dist;
      if (sampled || coupled) dist = sampling_probs(row, v, sp);
      if (options_.draft_confidence > 0.0) {  // (V exponentials a node: only when asked)
        double top =
            dist.empty() ? top_probability(row, v) : *std::max_element(dist.begin(), dist.end());
        if (score[i] + std::log(top) < min_log) {
          ended[i] = 1, --live;
          continue;
        }
        score[i] += std::log(top);
      }
      int64_t d = toks[i];
      if (coupled) d = inverse_cdf(dist, ahead[i][size_t(k - 1)]);
      if (sampled) {
        (*q)[i].push_back(std::move(dist));
        d = sample((*q)[i].back(), active[i].rng);
      }
      trees[i].add(d, k - 1, score[i]);
      toks[i] = d;
    }
    if (k == depth || live == 0) break;
    h = drafter_
            ->forward(long_tensor(toks, dev).view({b, 1}), h.unsqueeze(1),
                      long_tensor(pos, dev).view({b, 1}), cache_dft_.get())
            .squeeze(1);
    for (int64_t i = 0; i < b; ++i) cache_dft_->commit_prefix(i, 1);
  }
  for (int64_t i = 0; i < b; ++i) cache_dft_->truncate(i, active[i].drafter_cached);
  return trees;
}

// EAGLE-2 style: expand the top_k best nodes of each level by their top_k children, score paths
// by the drafter's cumulative log-probability, keep the best verify_tokens nodes.
std::vector<DraftTree> Engine::draft_tree(std::vector<Active>& active,
                                          const torch::Tensor& root_hidden, const api::Arm& arm) {
  int64_t b = int64_t(active.size()), k = arm.top_k;
  torch::Device dev = root_hidden.device();
  std::vector<DraftTree> trees;
  for (Active& a : active) trees.emplace_back(a.pending());
  // Level 1: children of the root from the drafter's prediction of h_L.
  torch::Tensor logp =
      torch::log_softmax(drafter_->draft_logits(root_hidden).to(torch::kFloat64), -1);
  auto [top_lp_t, top_ix_t] = logp.topk(k, -1);  // (B, k)
  torch::Tensor top_lp_c = top_lp_t.cpu().contiguous(), top_ix_c = top_ix_t.cpu().contiguous();
  auto top_lp = top_lp_c.accessor<double, 2>();
  auto top_ix = top_ix_c.accessor<int64_t, 2>();
  std::vector<std::vector<int32_t>> frontier(b);  // node ids expandable at the next level
  torch::Tensor parent_h = root_hidden.unsqueeze(1).expand({b, k, root_hidden.size(1)});  // (B,k,C)
  for (int64_t i = 0; i < b; ++i) {
    for (int64_t j = 0; j < k; ++j) {
      frontier[i].push_back(trees[i].add(top_ix[i][j], 0, top_lp[i][j]));
    }
  }
  // expanded[i] lists the node ids in drafter-cache order (speculative entries after L).
  std::vector<std::vector<int32_t>> expanded(b);
  torch::Tensor feat_of_frontier = parent_h.contiguous();  // feature of each frontier node's pair
  for (int32_t level = 2; level <= arm.depth; ++level) {
    // Choose the k best frontier nodes per request (frontier[i] has >= k nodes).
    std::vector<int64_t> toks(b * k), pos(b * k), chosen_rows(b * k);
    std::vector<std::vector<int32_t>> chosen(b);
    for (int64_t i = 0; i < b; ++i) {
      std::vector<int32_t> f = frontier[i];
      std::stable_sort(f.begin(), f.end(), [&](int32_t x, int32_t y) {
        return trees[i].node(x).score > trees[i].node(y).score;
      });
      for (int64_t j = 0; j < k; ++j) {
        int32_t node = f[j];
        chosen[i].push_back(node);
        toks[i * k + j] = trees[i].node(node).token;
        pos[i * k + j] = active[i].drafter_len + level - 2;
        auto it = std::find(frontier[i].begin(), frontier[i].end(), node);
        chosen_rows[i * k + j] = int64_t(it - frontier[i].begin());
      }
    }
    // Features of the chosen nodes' pairs, and which speculative entries each may see.
    torch::Tensor rows =
        long_tensor(chosen_rows, dev).view({b, k, 1}).expand({b, k, feat_of_frontier.size(2)});
    torch::Tensor feats = feat_of_frontier.gather(1, rows);  // (B,k,C)
    int64_t p = std::max<int64_t>(1, int64_t(expanded[0].size()));
    std::vector<uint8_t> vis(size_t(b) * k * p, 0);
    std::vector<int64_t> base(b);
    for (int64_t i = 0; i < b; ++i) {
      base[i] = active[i].drafter_cached;
      for (int64_t j = 0; j < k; ++j) {
        // A speculative entry is visible to the chosen node when it is one of its ancestors.
        for (int32_t a = trees[i].node(chosen[i][j]).parent; a > 0; a = trees[i].node(a).parent) {
          auto it = std::find(expanded[i].begin(), expanded[i].end(), a);
          if (it != expanded[i].end())
            vis[(size_t(i) * k + j) * p + size_t(it - expanded[i].begin())] = 1;
        }
      }
    }
    torch::Tensor visible = torch::from_blob(vis.data(), {b, k, p}, torch::kUInt8).to(torch::kBool);
    model::AttentionLayout layout;
    layout.tree = torch::eye(k, torch::kBool).expand({b, k, k}).to(dev);
    if (!expanded[0].empty()) {
      layout.spec_base = long_tensor(base, dev);
      layout.spec_visible = visible.to(dev);
    }
    torch::Tensor h = drafter_->forward(long_tensor(toks, dev).view({b, k}), feats,
                                        long_tensor(pos, dev).view({b, k}), cache_dft_.get(),
                                        layout);  // (B,k,C)
    for (int64_t i = 0; i < b; ++i) {
      cache_dft_->commit_prefix(i, k);
      for (int32_t node : chosen[i]) expanded[i].push_back(node);
    }
    torch::Tensor lp =
        torch::log_softmax(drafter_->draft_logits(h).to(torch::kFloat64), -1);  // (B,k,V)
    auto [clp_t, cix_t] = lp.topk(k, -1);                                       // (B,k,k)
    torch::Tensor clp_c = clp_t.cpu().contiguous(), cix_c = cix_t.cpu().contiguous();
    auto clp = clp_c.accessor<double, 3>();
    auto cix = cix_c.accessor<int64_t, 3>();
    for (int64_t i = 0; i < b; ++i) {
      frontier[i].clear();
      for (int64_t j = 0; j < k; ++j) {
        double base_score = trees[i].node(chosen[i][j]).score;
        for (int64_t c = 0; c < k; ++c) {
          frontier[i].push_back(
              trees[i].add(cix[i][j][c], chosen[i][j], base_score + clp[i][j][c]));
        }
      }
    }
    // Each new frontier node's pair feature is its parent's predicted hidden state.
    feat_of_frontier = h.unsqueeze(2).expand({b, k, k, h.size(2)}).reshape({b, k * k, h.size(2)});
  }
  for (int64_t i = 0; i < b; ++i) {
    cache_dft_->truncate(i, active[i].drafter_cached);
    // Draft trees are verified by sampling at each node, so dropping unlikely paths is exact.
    trees[i] = trees[i].pruned(arm.verify_tokens, log_or_minus_infinity(options_.draft_confidence));
  }
  return trees;
}

std::vector<DraftTree> Engine::draft_ngram(std::vector<Active>& active, int32_t depth) {
  std::vector<DraftTree> trees;
  for (Active& a : active) {
    DraftTree t(a.pending());
    int32_t at = 0;
    for (int64_t tok : ngram_propose(a.tokens, depth)) at = t.add(tok, at, 0.0);
    trees.push_back(std::move(t));
  }
  return trees;
}

std::vector<std::vector<int64_t>> Engine::copyable_drafts(const std::vector<Active>& active) const {
  std::vector<std::vector<int64_t>> out(active.size());
  int32_t longest = 0;  // the most any drafter arm verifies beyond the pending token
  for (const NamedArm& a : arms_)
    if (!a.arm.ngram) longest = std::max(longest, a.arm.verify_tokens - 1);
  if (options_.ngram_shortcut <= 0 || longest == 0) return out;
  int32_t min_n = options_.ngram_shortcut, max_n = std::max(4, min_n);
  for (size_t i = 0; i < active.size(); ++i) {
    out[i] = ngram_propose(active[i].tokens, longest, max_n, min_n);
  }
  return out;
}

// The target's forward over the drafts (B, N) with their tree layout: replayed from a CUDA graph
// when the engine has them, else eager.
model::ForwardResult Engine::verify_forward(const torch::Tensor& tokens,
                                            const torch::Tensor& positions,
                                            const model::AttentionLayout& layout) {
#ifdef TLT_GPU
  if (graphs_) {
    ++stats_.graph_replays;
    return graphs_->forward(tokens, positions, layout.tree);
  }
#endif
  return target_->forward(tokens, positions, cache_tgt_.get(), layout);
}

void Engine::spec_step(std::vector<Active>& active, int32_t arm_index, int32_t context,
                       const std::vector<std::vector<int64_t>>& copies) {
  double start = now_seconds();
  const api::Arm& arm = arms_[arm_index].arm;
  int64_t b = int64_t(active.size());
  torch::Device dev = target_->lm_head->weight.device();
  std::vector<std::vector<std::vector<double>>> q;
  std::vector<DraftTree> trees;
  bool sampled_chain = false;
  // A drafter arm takes each copyable draft up to its own verified-token count.
  std::vector<std::vector<int64_t>> copied(static_cast<size_t>(b));
  int64_t n_copied = 0;
  for (int64_t i = 0; i < b && !arm.ngram && size_t(i) < copies.size(); ++i) {
    size_t keep = std::min(copies[i].size(), size_t(arm.verify_tokens - 1));
    copied[i].assign(copies[i].begin(), copies[i].begin() + long(keep));
    n_copied += keep > 0 ? 1 : 0;
  }
  stats_.copied_drafts += n_copied;
  if (arm.ngram) {
    trees = draft_ngram(active, arm.depth);
  } else if (n_copied < b) {
    torch::Tensor root = drafter_catch_up(active);
    if (arm.top_k == 1) {
      trees = draft_chain(active, root, std::min(arm.depth, arm.verify_tokens - 1), &q);
      sampled_chain = !options_.reproducible;
    } else {
      trees = draft_tree(active, root, arm);
    }
  }
  trees.resize(size_t(b), DraftTree(0));
  for (int64_t i = 0; i < b; ++i) {
    if (copied[i].empty()) continue;
    trees[i] = DraftTree(active[i].pending());
    int32_t at = 0;
    for (int64_t tok : copied[i]) at = trees[i].add(tok, at, 0.0);
  }
  // One target forward over every request's draft, padded to the largest; with CUDA graphs, to
  // the arm's verified-token count, so that every step of the arm has one shape.
  int32_t n = 1;
  int64_t real_tokens = 0;
  for (const DraftTree& t : trees) n = std::max(n, t.size()), real_tokens += t.size();
  stats_.drafted += real_tokens - b;
  if (graphs_) n = std::max(n, arm.verify_tokens);  // an n-gram arm verifies depth + 1
  std::vector<int64_t> toks(b * n, 0), pos(b * n, 0);
  std::vector<uint8_t> mask_bytes(size_t(b) * n * n, 0);
  for (int64_t i = 0; i < b; ++i) {
    std::vector<uint8_t> m = trees[i].ancestor_mask();
    int32_t ni = trees[i].size();
    uint8_t* mi = mask_bytes.data() + size_t(i) * n * n;
    for (int32_t r = 0; r < n; ++r) {
      toks[i * n + r] = r < ni ? trees[i].node(r).token : 0;
      pos[i * n + r] = active[i].committed() + (r < ni ? trees[i].node(r).depth : 0);
      if (r >= ni) mi[size_t(r) * n + r] = 1;  // padding sees the prefix and itself only
      for (int32_t c = 0; c < ni && r < ni; ++c) mi[size_t(r) * n + c] = m[size_t(r) * ni + c];
    }
  }
  torch::Tensor mask =
      torch::from_blob(mask_bytes.data(), {b, n, n}, torch::kUInt8).to(torch::kBool);
  model::AttentionLayout layout;
  layout.tree = mask.to(dev);
  // Padded by a quarter or more: the matmuls run on the real tokens only (below that the
  // gathers cost about what they save on small models).
  if (!graphs_ && 4 * real_tokens <= 3 * b * n) {
    std::vector<int64_t> rows;
    rows.reserve(size_t(real_tokens));
    for (int64_t i = 0; i < b; ++i)
      for (int32_t r = 0; r < trees[i].size(); ++r) rows.push_back(i * n + r);
    layout.rows = long_tensor(rows, dev);
  }
  torch::Tensor tok_t = long_tensor(toks, dev).view({b, n}),
                pos_t = long_tensor(pos, dev).view({b, n});
  model::ForwardResult r = verify_forward(tok_t, pos_t, layout);
  torch::Tensor logits = host_logits(r.logits);  // (B, N, V)
  int64_t v = logits.size(2);
  int64_t emitted = 0;
  for (int64_t i = 0; i < b; ++i) {
    Active& a = active[i];
    NodeLogits nl{logits.data_ptr<double>() + i * n * v, v};
    Verdict verdict;
    if (a.req.sampling.greedy()) {
      verdict = accept_greedy(trees[i], nl);
    } else if (sampled_chain && copied[i].empty()) {
      verdict = options_.chain_rule(trees[i], nl, q[i], a.req.sampling, a.rng);
    } else {
      verdict = accept_by_sampling(trees[i], nl, a.req.sampling, a.rng);
    }
    std::vector<int64_t> path(verdict.path.begin(), verdict.path.end());
    cache_tgt_->commit(i, path);
    std::vector<int64_t> new_tokens;
    for (size_t j = 1; j < path.size(); ++j)
      new_tokens.push_back(trees[i].node(int32_t(path[j])).token);
    new_tokens.push_back(verdict.next_token);
    a.spec_steps++;
    a.accepted += verdict.accepted();
    stats_.accepted += verdict.accepted();
    stats_.arm_accepted[arm_index] += verdict.accepted();
    emitted += int64_t(new_tokens.size());
    torch::Tensor hid = r.hidden[i].index_select(0, long_tensor(path, dev));  // (a+1, C)
    emit(a, a.committed(), new_tokens, hid);  // rows start at the old pending token
  }
  ++stats_.spec_steps;
  stats_.request_spec_steps += b;
  ++stats_.arm_steps[arm_index];
  stats_.arm_request_steps[arm_index] += b;
  selector_->report_step(b, arm_index, double(emitted), now_seconds() - start, context);
}

}  // namespace tlt::rollout
