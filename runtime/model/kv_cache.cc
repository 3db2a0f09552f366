#include "runtime/model/kv_cache.h"

#include <algorithm>
#include <stdexcept>

namespace tlt::model {

KVCache::KVCache(int64_t n_layers, int64_t max_batch, int64_t n_kv_heads, int64_t max_seq,
                 int64_t head_dim, torch::Dtype dtype, torch::Device device)
    : max_batch_(max_batch), max_seq_(max_seq) {
  auto opts = torch::TensorOptions().dtype(dtype).device(device);
  for (int64_t l = 0; l < n_layers; ++l) {
    k_.push_back(torch::zeros({max_batch, n_kv_heads, max_seq, head_dim}, opts));
    v_.push_back(torch::zeros({max_batch, n_kv_heads, max_seq, head_dim}, opts));
  }
}

int64_t KVCache::max_length() const {
  int64_t m = 0;
  for (int64_t i = focus_first_; i < focus_first_ + batch(); ++i) m = std::max(m, lengths_[i]);
  return m;
}

int64_t KVCache::add_slot() {
  if (n_slots() >= max_batch_) throw std::length_error("KVCache: all slots are in use");
  lengths_.push_back(0);
  return n_slots() - 1;
}

void KVCache::remove_slot(int64_t slot) {
  int64_t last = n_slots() - 1;
  if (slot != last) {
    copy_positions(last, slot, lengths_[last]);
    lengths_[slot] = lengths_[last];
  }
  lengths_.pop_back();
}

void KVCache::copy_positions(int64_t from, int64_t to, int64_t n) {
  for (size_t l = 0; l < k_.size(); ++l) {
    k_[l][to].narrow(1, 0, n).copy_(k_[l][from].narrow(1, 0, n));
    v_[l][to].narrow(1, 0, n).copy_(v_[l][from].narrow(1, 0, n));
  }
}

torch::Tensor KVCache::lengths_tensor() const {
  if (device_lengths_.defined()) return device_lengths_;
  std::vector<int64_t> focused(lengths_.begin() + focus_first_,
                               lengths_.begin() + focus_first_ + batch());
  return torch::tensor(focused, torch::kInt64).to(k_[0].device());
}

void KVCache::write(int64_t layer, const torch::Tensor& k, const torch::Tensor& v) {
  int64_t b = k.size(0), t = k.size(2);
  if (!device_lengths_.defined() && max_length() + t > max_seq_) {
    throw std::length_error("KVCache: sequence exceeds max_seq");
  }
  // idx[b, h, t, d] = length(b) + t: where each new token lands.
  torch::Tensor idx =
      lengths_tensor().view({b, 1, 1, 1}) +
      torch::arange(t, torch::TensorOptions().dtype(torch::kInt64).device(k.device()))
          .view({1, 1, t, 1});
  idx = idx.expand_as(k);
  k_[layer].narrow(0, focus_first_, b).scatter_(2, idx, k);
  v_[layer].narrow(0, focus_first_, b).scatter_(2, idx, v);
}

std::pair<torch::Tensor, torch::Tensor> KVCache::view(int64_t layer, int64_t s) const {
  int64_t b = batch();
  return {k_[layer].narrow(0, focus_first_, b).narrow(2, 0, s),
          v_[layer].narrow(0, focus_first_, b).narrow(2, 0, s)};
}

void KVCache::commit(int64_t slot, const std::vector<int64_t>& kept) {
  int64_t base = lengths_[slot];
  bool identity = true;
  for (size_t j = 0; j < kept.size(); ++j) identity &= kept[j] == static_cast<int64_t>(j);
  if (!identity) {
    torch::Tensor src = torch::tensor(kept, torch::kInt64).to(k_[0].device()) + base;
    int64_t n = static_cast<int64_t>(kept.size());
    for (size_t l = 0; l < k_.size(); ++l) {
      // Gather first (sources may overlap destinations), then write back contiguously.
      torch::Tensor ks = k_[l][slot].index_select(1, src);  // (Hkv, n, D)
      torch::Tensor vs = v_[l][slot].index_select(1, src);
      k_[l][slot].narrow(1, base, n).copy_(ks);
      v_[l][slot].narrow(1, base, n).copy_(vs);
    }
  }
  lengths_[slot] += static_cast<int64_t>(kept.size());
}

}  // namespace tlt::model
