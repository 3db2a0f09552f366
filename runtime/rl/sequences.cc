#include "runtime/rl/sequences.h"

#include <algorithm>
#include <numeric>

#include "runtime/model/precision.h"
#include "runtime/rl/grpo.h"
#include "runtime/rl/text.h"

namespace tlt::rl {

SequenceBatch make_batch(const std::vector<std::vector<int64_t>>& prompts,
                         const std::vector<std::vector<int64_t>>& responses) {
  int64_t b = int64_t(prompts.size()), t = 2;
  for (int64_t i = 0; i < b; ++i)
    t = std::max<int64_t>(t, int64_t(prompts[i].size() + responses[i].size()));
  std::vector<int64_t> tok(b * t, kEndOfText);
  std::vector<float> mask(b * (t - 1), 0.f);
  SequenceBatch out;
  for (int64_t i = 0; i < b; ++i) {
    int64_t p = int64_t(prompts[i].size()), r = int64_t(responses[i].size());
    std::copy(prompts[i].begin(), prompts[i].end(), tok.begin() + i * t);
    std::copy(responses[i].begin(), responses[i].end(), tok.begin() + i * t + p);
    // Position j predicts token j+1; response tokens sit at p .. p+r-1.
    for (int64_t j = p - 1; j < p + r - 1; ++j) mask[i * (t - 1) + j] = 1.f;
    out.response_tokens += r;
  }
  out.tokens = torch::tensor(tok, torch::kInt64).view({b, t});
  out.targets = out.tokens.narrow(1, 1, t - 1).contiguous();
  out.mask = torch::tensor(mask, torch::kFloat32).view({b, t - 1});
  return out;
}

std::vector<int64_t> row_lengths(const SequenceBatch& batch) {
  int64_t b = batch.mask.size(0), t1 = batch.mask.size(1);
  torch::Tensor mask = batch.mask.cpu();                            // read here; a no-op on the CPU
  torch::Tensor j = torch::arange(t1, torch::kInt64).unsqueeze(0);  // (1, T-1)
  torch::Tensor last = (j * (mask > 0).to(torch::kInt64)).amax(1);  // (B,)
  torch::Tensor len = (last + 2).contiguous();                      // (B,)
  return std::vector<int64_t>(len.data_ptr<int64_t>(), len.data_ptr<int64_t>() + b);
}

namespace {

// Rows longest first (ties by row index), cut into micro-batches of rows * t <= max_tokens, t
// the micro-batch's first (longest) row's length.
void pack_longest_first(std::vector<int64_t> rows, const std::vector<int64_t>& len,
                        int64_t max_tokens, std::vector<MicroBatch>& out) {
  std::stable_sort(rows.begin(), rows.end(), [&](int64_t x, int64_t y) { return len[x] > len[y]; });
  size_t first = out.size();
  for (int64_t r : rows) {
    if (out.size() == first || int64_t(out.back().rows.size() + 1) * out.back().t > max_tokens)
      out.push_back(MicroBatch{{}, len[r]});
    out.back().rows.push_back(r);
  }
}

// The rows of one prompt group (its shared prefix q, run once), longest first, cut into runs of
// consecutive rows with the fewest positions in all: a run of n rows whose first is t long runs
// n * (t - q), at most max_tokens unless it is one row, plus kMicroBatchOverhead per run.
void pack_group(std::vector<int64_t> rows, const std::vector<int64_t>& len, int64_t q,
                int64_t group, int64_t max_tokens, std::vector<MicroBatch>& out) {
  std::stable_sort(rows.begin(), rows.end(), [&](int64_t x, int64_t y) { return len[x] > len[y]; });
  size_t n = rows.size();
  // best[i]: the least cost of rows[i..n); cut[i]: where the run starting at i ends.
  std::vector<int64_t> best(n + 1, 0), cut(n + 1, 0);
  for (size_t i = n; i-- > 0;) {
    int64_t t = len[size_t(rows[i])];
    best[i] = -1;
    for (size_t j = i + 1; j <= n; ++j) {
      int64_t positions = int64_t(j - i) * (t - q);
      if (j > i + 1 && positions > max_tokens) break;
      int64_t cost = kMicroBatchOverhead + positions + best[j];
      if (best[i] < 0 || cost < best[i]) best[i] = cost, cut[i] = int64_t(j);
    }
  }
  for (size_t i = 0; i < n; i = size_t(cut[i]))
    out.push_back(MicroBatch{std::vector<int64_t>(rows.begin() + int64_t(i), rows.begin() + cut[i]),
                             len[size_t(rows[i])], q, group});
}

// Position of each row's first response target (T-1 for a row without one), and the row's
// prompt: its tokens up to and including that position.
std::vector<int64_t> first_targets(const SequenceBatch& batch) {
  int64_t b = batch.mask.size(0), t1 = batch.mask.size(1);
  torch::Tensor mask = batch.mask.cpu();  // read here; a no-op on the CPU
  torch::Tensor j = torch::arange(t1, torch::kInt64).unsqueeze(0).expand({b, t1});   // (B, T-1)
  torch::Tensor first = torch::where(mask > 0, j, torch::full_like(j, t1)).amin(1);  // (B,)
  first = first.contiguous();
  return std::vector<int64_t>(first.data_ptr<int64_t>(), first.data_ptr<int64_t>() + b);
}

}  // namespace

std::vector<MicroBatch> plan_microbatches(const SequenceBatch& batch, int64_t lo, int64_t hi,
                                          int64_t max_tokens, bool share_prompts) {
  std::vector<int64_t> rows(static_cast<size_t>(hi - lo));
  std::iota(rows.begin(), rows.end(), lo);
  if (max_tokens <= 0) return {MicroBatch{rows, batch.tokens.size(1)}};
  std::vector<int64_t> len = row_lengths(batch);
  std::vector<MicroBatch> out;
  if (!share_prompts) {
    pack_longest_first(rows, len, max_tokens, out);
    return out;
  }
  // Groups of rows with the same prompt, in order of their first row; rows whose prompt no other
  // row has, or whose shared prefix is short, are planned together without sharing.
  std::vector<int64_t> first = first_targets(batch);
  torch::Tensor tokens = batch.tokens.contiguous().cpu();
  const int64_t* tok = tokens.data_ptr<int64_t>();
  int64_t t = tokens.size(1);
  auto prompt = [&](int64_t r) {
    int64_t n = first[size_t(r)] + 1;  // < t: the row has a response token
    return std::vector<int64_t>(tok + r * t, tok + r * t + n);
  };
  std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> groups;  // prompt, rows
  std::vector<int64_t> alone;
  for (int64_t r : rows) {
    if (first[size_t(r)] >= t - 1) {  // no response token: nothing to share a prompt for
      alone.push_back(r);
      continue;
    }
    std::vector<int64_t> p = prompt(r);
    auto g =
        std::find_if(groups.begin(), groups.end(), [&](const auto& x) { return x.first == p; });
    if (g == groups.end()) {
      groups.push_back({std::move(p), {r}});
    } else {
      g->second.push_back(r);
    }
  }
  std::vector<MicroBatch> shared;
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto& [p, members] = groups[g];
    int64_t q = int64_t(p.size()) - 1;  // the prompt less its last token
    if (members.size() < 2 || q < kMinSharedPrefix) {
      alone.insert(alone.end(), members.begin(), members.end());
    } else {
      pack_group(members, len, q, int64_t(g), max_tokens, shared);
    }
  }
  pack_longest_first(alone, len, max_tokens, out);
  out.insert(out.end(), shared.begin(), shared.end());
  return out;
}

int64_t shared_prefix_length(const SequenceBatch& batch) {
  int64_t b = batch.tokens.size(0), t = batch.tokens.size(1);
  if (b < 2) return 0;
  std::vector<int64_t> first = first_targets(batch);
  int64_t q = *std::min_element(first.begin(), first.end());  // first response target's position
  // Columns where some row differs from row 0; the prefix ends at the first of them.
  torch::Tensor differs = batch.tokens.ne(batch.tokens.narrow(0, 0, 1)).any(0);  // (T,)
  torch::Tensor at = differs.nonzero();
  if (at.size(0) > 0) q = std::min(q, at[0][0].item<int64_t>());
  return std::min(q, t - 2);
}

SequenceBatch gather_rows(const SequenceBatch& batch, const MicroBatch& mb) {
  torch::Tensor idx = torch::tensor(mb.rows, torch::kInt64).to(batch.tokens.device());  // (b,)
  SequenceBatch out;
  out.tokens = batch.tokens.index_select(0, idx).narrow(1, 0, mb.t).contiguous();        // (b, t)
  out.targets = batch.targets.index_select(0, idx).narrow(1, 0, mb.t - 1).contiguous();  // (b, t-1)
  out.mask = batch.mask.index_select(0, idx).narrow(1, 0, mb.t - 1).contiguous();        // (b, t-1)
  out.response_tokens = int64_t(out.mask.sum().item<double>());
  return out;
}

SequenceBatch to_device(const SequenceBatch& batch, const torch::Device& device) {
  SequenceBatch out = batch;
  out.tokens = batch.tokens.to(device);
  out.targets = batch.targets.to(device);
  out.mask = batch.mask.to(device);
  return out;
}

namespace {

// chunked_token_logprobs as an autograd function: the forward saves hidden, weight and targets,
// not the logits; the backward recomputes them chunk by chunk.
//   d logp_i / d logits_ij = (onehot(target_i)_j - softmax(logits_i)_j), logits = h W^T / temp.
class ChunkedLogprobs : public torch::autograd::Function<ChunkedLogprobs> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& hidden,
                               const torch::Tensor& weight, const torch::Tensor& targets,
                               double temperature, int64_t rows) {
    ctx->save_for_backward({hidden, weight, targets});
    ctx->saved_data["temperature"] = temperature;
    ctx->saved_data["rows"] = rows;
    // Under mixed precision (model/precision.h) the forward's products run in bfloat16; the
    // backward, which runs after the autocast region, repeats them in bfloat16 itself.
    bool bf16 = model::autocast_active(hidden.device());
    ctx->saved_data["bfloat16"] = bf16;
    // One cast of the head for all chunks (autocast would cast it per chunk).
    torch::Tensor w = bf16 ? weight.to(torch::kBFloat16) : weight;  // (V, C)
    int64_t n = hidden.size(0);
    torch::Tensor out = torch::empty({n}, hidden.options());  // (N,)
    for (int64_t lo = 0; lo < n; lo += rows) {
      int64_t k = std::min(rows, n - lo);
      torch::Tensor logits = chunk_logits(hidden.narrow(0, lo, k), w, temperature,
                                          hidden.scalar_type());  // (k, V)
      torch::Tensor t = targets.narrow(0, lo, k).unsqueeze(1);    // (k, 1)
      out.narrow(0, lo, k).copy_(logits.gather(1, t).squeeze(1) - logits.logsumexp(1));
    }
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    auto saved = ctx->get_saved_variables();
    const torch::Tensor &hidden = saved[0], &weight = saved[1], &targets = saved[2];
    double temperature = ctx->saved_data["temperature"].toDouble();
    int64_t rows = ctx->saved_data["rows"].toInt();
    bool bf16 = ctx->saved_data["bfloat16"].toBool();
    auto low = [&](const torch::Tensor& x) { return bf16 ? x.to(torch::kBFloat16) : x; };
    torch::Tensor g = grad_out[0];  // (N,)
    torch::Tensor g_hidden = torch::zeros_like(hidden), g_weight;
    torch::Tensor w = low(weight);  // (V, C)
    // In bfloat16 the weight's gradient takes one product per kFlushRows rows of d, not one per
    // chunk: each product's (V, C) result is converted and added in float32, which cost more
    // than the products themselves at SmolLM2's vocabulary.
    constexpr int64_t kFlushRows = 1024;
    std::vector<torch::Tensor> ds, hs;  // pending (k, V) and (k, C) chunks, bfloat16
    int64_t pending = 0;
    auto flush = [&] {
      if (ds.empty()) return;
      torch::Tensor part = torch::cat(ds).t().mm(torch::cat(hs));  // (V, C)
      g_weight = g_weight.defined() ? g_weight.add_(part) : part.to(weight.scalar_type());
      ds.clear(), hs.clear(), pending = 0;
    };
    for (int64_t lo = 0, n = hidden.size(0); lo < n; lo += rows) {
      int64_t k = std::min(rows, n - lo);
      torch::Tensor h = low(hidden.narrow(0, lo, k));      // (k, C)
      torch::Tensor gk = g.narrow(0, lo, k).unsqueeze(1);  // (k, 1)
      torch::Tensor d =
          chunk_logits(h, w, temperature, hidden.scalar_type()).softmax(1).mul_(-gk);  // (k, V)
      d.scatter_add_(1, targets.narrow(0, lo, k).unsqueeze(1), gk);
      d.div_(temperature);  // d loss / d (h W^T)
      torch::Tensor dl = low(d);
      g_hidden.narrow(0, lo, k).copy_(dl.mm(w));  // (k, C)
      if (bf16) {
        ds.push_back(dl), hs.push_back(h), pending += k;
        if (pending >= kFlushRows) flush();
      } else if (!g_weight.defined()) {
        g_weight = d.t().mm(h);  // (V, C)
      } else {
        g_weight.addmm_(d.t(), h);
      }
    }
    flush();
    if (!g_weight.defined()) g_weight = torch::zeros_like(weight);  // no rows
    return {g_hidden, g_weight, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }

 private:
  // (k, C) x (V, C) -> (k, V) logits divided by the temperature, in `dtype` (the product itself
  // in bfloat16 under autocast or when h and weight are bfloat16).
  static torch::Tensor chunk_logits(const torch::Tensor& h, const torch::Tensor& weight,
                                    double temperature, torch::ScalarType dtype) {
    torch::Tensor logits = h.mm(weight.t()).to(dtype);
    return temperature == 1.0 ? logits : logits.div_(temperature);
  }
};

}  // namespace

torch::Tensor chunked_token_logprobs(const torch::Tensor& hidden, const torch::Tensor& weight,
                                     const torch::Tensor& targets, double temperature,
                                     int64_t max_logits) {
  int64_t rows = std::max<int64_t>(1, max_logits / std::max<int64_t>(1, weight.size(0)));
  return ChunkedLogprobs::apply(hidden, weight, targets, temperature, rows);
}

namespace {

// Log-probabilities (B, N) of targets (B, N) at mask (B, N) from final hidden states (B, N, C),
// 0 elsewhere (see sequence_logprobs).
torch::Tensor logprobs_at(model::Transformer& model, const torch::Tensor& hidden,
                          const torch::Tensor& targets, const torch::Tensor& mask,
                          double temperature, int64_t max_logits) {
  int64_t b = hidden.size(0), n = hidden.size(1);
  if (b * n * model->config().vocab <= max_logits) {
    // All logits fit in one chunk (the presets' 128 symbols): the plain log_softmax, whose
    // floating-point results the presets' runs and their tests were measured with.
    // (B, N, V); float32 even when the head's product ran in bfloat16 (mixed precision).
    torch::Tensor logits = model->lm_head(hidden).to(hidden.scalar_type());
    if (temperature != 1.0) logits = logits / temperature;
    return token_logprobs(logits, targets) * mask;
  }
  // The LM head runs on response positions only (mask 1): R of the B*N.
  torch::Tensor at = mask.reshape(-1).nonzero().squeeze(1);           // (R,)
  torch::Tensor h = hidden.reshape({b * n, -1}).index_select(0, at);  // (R, C)
  torch::Tensor target = targets.reshape(-1).index_select(0, at);     // (R,)
  torch::Tensor logp =
      chunked_token_logprobs(h, model->lm_head->weight, target, temperature, max_logits);  // (R,)
  return torch::zeros({b * n}, logp.options()).index_put({at}, logp).view({b, n});
}

}  // namespace

model::SharedPrefix run_prefix(model::Transformer& model, const torch::Tensor& tokens) {
  int64_t q = tokens.size(0);
  model::SharedPrefix prefix;
  model::AttentionLayout record;
  record.record = &prefix;
  torch::Device dev = model->lm_head->weight.device();
  torch::Tensor positions = torch::arange(q, torch::dtype(torch::kInt64).device(dev)).unsqueeze(0);
  model->run_layers(model->layers, model->embed(tokens.to(dev).unsqueeze(0)), positions, nullptr,
                    record);  // (1, q)
  return prefix;
}

torch::Tensor sequence_logprobs(model::Transformer& model, const SequenceBatch& on_any,
                                double temperature, int64_t max_logits, bool share_prefix,
                                const model::SharedPrefix* prefix) {
  torch::Device dev = model->lm_head->weight.device();
  const SequenceBatch batch = to_device(on_any, dev);  // the same tensors when already there
  int64_t b = batch.tokens.size(0), t = batch.tokens.size(1);
  model::SharedPrefix own;
  if (prefix == nullptr && share_prefix) {
    int64_t q = shared_prefix_length(batch);
    // The shared prefix once, batch 1: its keys and values, kept for every row to attend to.
    if (q >= kMinSharedPrefix) own = run_prefix(model, batch.tokens[0].narrow(0, 0, q));
    prefix = &own;
  }
  int64_t q = prefix ? prefix->length() : 0;
  TORCH_CHECK(q <= t - 2, "a shared prefix of ", q, " tokens leaves no target of ", t,
              "-token rows");
  model::AttentionLayout layout;
  if (q > 0) layout.prefix = prefix;
  int64_t n = t - 1 - q;                                // positions each row runs
  torch::Tensor inputs = batch.tokens.narrow(1, q, n);  // (B, N)
  torch::Tensor positions =
      (q + torch::arange(n, torch::dtype(torch::kInt64).device(dev))).unsqueeze(0).expand({b, n});
  torch::Tensor x = model->embed(inputs);  // (B, N, C)
  torch::Tensor hidden =
      model->norm(model->run_layers(model->layers, x, positions, nullptr, layout));  // (B, N, C)
  torch::Tensor logp = logprobs_at(model, hidden, batch.targets.narrow(1, q, n),
                                   batch.mask.narrow(1, q, n), temperature, max_logits);  // (B, N)
  if (q == 0) return logp;
  return torch::cat({torch::zeros({b, q}, logp.options()), logp}, 1);  // (B, T-1)
}

}  // namespace tlt::rl
