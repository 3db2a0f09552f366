#include "runtime/rl/trainer_shards.h"

#include <sys/resource.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <sstream>

namespace tlt::rl {
namespace {

// The collective's copy of `t`: `t` itself for Gloo, a device copy for NCCL.
torch::Tensor on_backend(tst::Collective& c, const torch::Tensor& t) {
  return c.cuda() && !t.is_cuda() ? t.to(torch::kCUDA) : t;
}

Status all_reduce(tst::Collective& c, torch::Tensor& t) {
  torch::Tensor d = on_backend(c, t);
  TLT_RETURN_IF_ERROR(c.all_reduce_sum(d));
  if (!d.is_same(t)) t.copy_(d);
  return Status::Ok();
}

// Whether rows i and j hold the same prompt: the same tokens before their first response
// target (prompt_len, -1 for a row without one; mask (B, T-1): target j is token j+1).
bool same_prompt(const std::vector<int64_t>& prompt_len, const torch::Tensor& tokens, int64_t i,
                 int64_t j) {
  if (prompt_len[size_t(i)] < 0 || prompt_len[size_t(i)] != prompt_len[size_t(j)]) return false;
  int64_t n = prompt_len[size_t(i)];
  return torch::equal(tokens[i].narrow(0, 0, n), tokens[j].narrow(0, 0, n));
}

// Optimizer::state()'s key: the parameter's TensorImpl, as a pointer (LibTorch 2.x) or as the
// text c10::guts::to_string made of it (LibTorch 1.13).
using StateKey = std::decay_t<decltype(std::declval<torch::optim::Optimizer&>().state())>::key_type;
template <class K>
K key_of(void* impl);
template <>
[[maybe_unused]] std::string key_of<std::string>(void* impl) {
  std::ostringstream s;
  s << impl;
  return s.str();
}
template <>
[[maybe_unused]] void* key_of<void*>(void* impl) {
  return impl;
}
StateKey state_key(const torch::Tensor& p) {
  return key_of<StateKey>(p.unsafeGetTensorImpl());
}

}  // namespace

std::pair<int64_t, int64_t> rank_rows(const SequenceBatch& batch, int64_t lo, int64_t hi,
                                      int64_t group_size, int rank, int world) {
  if (world <= 1) return {lo, hi};
  std::vector<int64_t> starts{lo};  // where each run begins
  if (group_size > 0) {
    for (int64_t i = (lo / group_size + 1) * group_size; i < hi; i += group_size)
      starts.push_back(i);
  } else {
    torch::Tensor mask = batch.mask.narrow(0, lo, hi - lo).to(torch::kCPU);  // (b, T-1)
    torch::Tensor tokens = batch.tokens.to(torch::kCPU);                     // (B, T)
    // A row's prompt: the tokens up to its first response target; -1 without one.
    std::vector<int64_t> prompt_len(size_t(hi), -1);
    torch::Tensor any = mask.gt(0).any(1), first = mask.gt(0).to(torch::kInt64).argmax(1);  // (b,)
    for (int64_t i = lo; i < hi; ++i)
      if (any[i - lo].item<bool>()) prompt_len[size_t(i)] = first[i - lo].item<int64_t>() + 1;
    for (int64_t i = lo + 1; i < hi; ++i)
      if (!same_prompt(prompt_len, tokens, i - 1, i)) starts.push_back(i);
  }
  const int64_t n = int64_t(starts.size());
  auto edge = [&](int r) {
    int64_t k = n * r / world;
    return k >= n ? hi : starts[size_t(k)];
  };
  return {edge(rank), edge(rank + 1)};
}

std::vector<int> partition_by_numel(const std::vector<torch::Tensor>& tensors, int world) {
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return tensors[a].numel() > tensors[b].numel(); });
  std::vector<int64_t> held(size_t(std::max(world, 1)), 0);
  std::vector<int> owner(tensors.size(), 0);
  for (size_t i : order) {
    int r = int(std::min_element(held.begin(), held.end()) - held.begin());
    owner[i] = r;
    held[size_t(r)] += tensors[i].numel();
  }
  return owner;
}

Status all_reduce_gradients(tst::Collective& c, const std::vector<torch::Tensor>& params) {
  std::map<torch::ScalarType, std::vector<torch::Tensor>> by_dtype;
  for (torch::Tensor p : params) {
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    by_dtype[p.grad().scalar_type()].push_back(p.grad());
  }
  torch::NoGradGuard no_grad;
  for (auto& [dtype, grads] : by_dtype) {
    std::vector<torch::Tensor> flat_parts;
    for (const torch::Tensor& g : grads) flat_parts.push_back(g.reshape({-1}));
    torch::Tensor flat = torch::cat(flat_parts);  // (sum of numel,)
    TLT_RETURN_IF_ERROR(all_reduce(c, flat));
    int64_t at = 0;
    for (torch::Tensor g : grads) {
      g.copy_(flat.narrow(0, at, g.numel()).view(g.sizes()));
      at += g.numel();
    }
  }
  return Status::Ok();
}

Status broadcast_tensor(tst::Collective& c, torch::Tensor& t, int root) {
  torch::Tensor d = on_backend(c, t);
  TLT_RETURN_IF_ERROR(c.broadcast(d, root));
  if (!d.is_same(t)) t.copy_(d);
  return Status::Ok();
}

Status broadcast_from_owners(tst::Collective& c, const std::vector<torch::Tensor>& tensors,
                             const std::vector<int>& owner) {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < tensors.size(); ++i) {
    torch::Tensor t = tensors[i].detach();  // the parameter's storage
    TLT_RETURN_IF_ERROR(broadcast_tensor(c, t, owner[i]));
  }
  return Status::Ok();
}

StatusOr<torch::Tensor> gather_rows(tst::Collective& c, const torch::Tensor& row) {
  torch::Tensor table = torch::zeros({c.world(), row.numel()}, row.options());  // (W, k)
  table[c.rank()].copy_(row.reshape({-1}));
  TLT_RETURN_IF_ERROR(all_reduce(c, table));
  return table;
}

Status broadcast_batch(tst::Collective& c, SequenceBatch* batch, torch::Tensor* advantages) {
  const bool root = c.rank() == 0;
  torch::Tensor header = torch::zeros({5}, torch::kInt64);  // B, T, tokens, mask and adv dtypes
  if (root) {
    header = torch::tensor({batch->tokens.size(0), batch->tokens.size(1), batch->response_tokens,
                            int64_t(batch->mask.scalar_type()), int64_t(advantages->scalar_type())},
                           torch::kInt64);
  }
  TLT_RETURN_IF_ERROR(broadcast_tensor(c, header, 0));
  const int64_t b = header[0].item<int64_t>(), t = header[1].item<int64_t>();
  if (!root) {
    auto i64 = torch::TensorOptions().dtype(torch::kInt64);
    batch->tokens = torch::empty({b, t}, i64);
    batch->targets = torch::empty({b, t - 1}, i64);
    batch->mask = torch::empty({b, t - 1}, torch::ScalarType(header[3].item<int64_t>()));
    batch->response_tokens = header[2].item<int64_t>();
    *advantages = torch::empty({b}, torch::ScalarType(header[4].item<int64_t>()));
  }
  for (torch::Tensor* t : {&batch->tokens, &batch->targets, &batch->mask, advantages}) {
    *t = t->contiguous();
    TLT_RETURN_IF_ERROR(broadcast_tensor(c, *t, 0));
  }
  return Status::Ok();
}

int64_t bit_checksum(const std::vector<torch::Tensor>& tensors) {
  uint64_t sum = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    torch::Tensor flat = tensors[i].detach().to(torch::kCPU).contiguous().reshape({-1});
    torch::Tensor words =
        flat.view(flat.element_size() % 4 == 0 ? torch::kInt32 : torch::kInt16).to(torch::kInt64);
    sum += uint64_t(i + 1) * uint64_t(words.sum().item<int64_t>());
  }
  return int64_t(sum);
}

int64_t adam_state_bytes(torch::optim::AdamW& optimizer) {
  int64_t bytes = 0;
  for (const auto& kv : optimizer.state()) {
    const auto& s = static_cast<const torch::optim::AdamWParamState&>(*kv.second);
    for (const torch::Tensor& t : {s.exp_avg(), s.exp_avg_sq(), s.max_exp_avg_sq()})
      if (t.defined()) bytes += t.numel() * int64_t(t.element_size());
  }
  return bytes;
}

Status gather_adam_state(tst::Collective& c, const std::vector<torch::Tensor>& params,
                         const std::vector<int>& owner, torch::optim::AdamW& own,
                         torch::optim::AdamW* full) {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params.size(); ++i) {
    const bool mine = owner[i] == c.rank();
    const StateKey key = state_key(params[i]);
    torch::optim::AdamWParamState* s = nullptr;
    if (mine && own.state().count(key))
      s = static_cast<torch::optim::AdamWParamState*>(own.state()[key].get());
    torch::Tensor step = torch::tensor({s ? s->step() : int64_t(0)}, torch::kInt64);
    TLT_RETURN_IF_ERROR(broadcast_tensor(c, step, owner[i]));
    if (step.item<int64_t>() == 0) continue;
    torch::Tensor m = s ? s->exp_avg().contiguous() : torch::empty_like(params[i]);
    torch::Tensor v = s ? s->exp_avg_sq().contiguous() : torch::empty_like(params[i]);
    TLT_RETURN_IF_ERROR(broadcast_tensor(c, m, owner[i]));
    TLT_RETURN_IF_ERROR(broadcast_tensor(c, v, owner[i]));
    if (!full) continue;
    auto state = std::make_unique<torch::optim::AdamWParamState>();
    state->step(step.item<int64_t>());
    state->exp_avg(m.clone()), state->exp_avg_sq(v.clone());
    full->state()[key] = std::move(state);
  }
  return Status::Ok();
}

Status scatter_adam_state(tst::Collective& c, const std::vector<torch::Tensor>& params,
                          const std::vector<int>& owner, torch::optim::AdamW& own,
                          torch::optim::AdamW* full) {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params.size(); ++i) {
    const StateKey key = state_key(params[i]);
    torch::optim::AdamWParamState* s = nullptr;
    if (full && full->state().count(key))
      s = static_cast<torch::optim::AdamWParamState*>(full->state()[key].get());
    torch::Tensor step = torch::tensor({s ? s->step() : int64_t(0)}, torch::kInt64);
    TLT_RETURN_IF_ERROR(broadcast_tensor(c, step, 0));
    own.state().erase(key);
    if (step.item<int64_t>() == 0) continue;
    torch::Tensor m = s ? s->exp_avg().contiguous() : torch::empty_like(params[i]);
    torch::Tensor v = s ? s->exp_avg_sq().contiguous() : torch::empty_like(params[i]);
    TLT_RETURN_IF_ERROR(broadcast_tensor(c, m, 0));
    TLT_RETURN_IF_ERROR(broadcast_tensor(c, v, 0));
    if (owner[i] != c.rank()) continue;
    auto state = std::make_unique<torch::optim::AdamWParamState>();
    state->step(step.item<int64_t>());
    state->exp_avg(m.clone()), state->exp_avg_sq(v.clone());
    own.state()[key] = std::move(state);
  }
  return Status::Ok();
}

int64_t peak_rss_bytes() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return int64_t(ru.ru_maxrss) * 1024;  // Linux: kilobytes
}

}  // namespace tlt::rl
