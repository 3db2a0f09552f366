// Key/value cache for batched decoding with speculation, one slot per active request.
//
// Slots are dense: the active requests are slots [0, B), so a forward reads the cache through a
// view (no gather). Removing a request moves the last slot into its place. A forward writes the
// keys and values of its T new tokens right after each slot's committed length without
// committing them; commit() then keeps the accepted ones (compacting a tree path into
// consecutive positions) and advances the length. Whatever was written past the committed
// length is never attended to again, so rejected tokens leave no trace: rollback is free.
//
// Thread safety: none; one engine thread owns a cache.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace tlt::model {

class KVCache {
 public:
  // Allocates max_batch slots of max_seq positions for each of n_layers layers.
  KVCache(int64_t n_layers, int64_t max_batch, int64_t n_kv_heads, int64_t max_seq,
          int64_t head_dim, torch::Dtype dtype, torch::Device device);
  KVCache(const KVCache&) = delete;
  KVCache& operator=(const KVCache&) = delete;

  // Active slots: all of them, the focused range (see focus()), or the device lengths' (below).
  int64_t batch() const {
    if (device_lengths_.defined()) return device_lengths_.size(0);
    return focus_count_ >= 0 ? focus_count_ : n_slots();
  }
  int64_t n_slots() const { return static_cast<int64_t>(lengths_.size()); }
  // Restricts batch(), lengths_tensor(), write() and view() to slots [first, first + count),
  // e.g. to prefill one new request while others are active. unfocus() restores all slots.
  void focus(int64_t first, int64_t count) { focus_first_ = first, focus_count_ = count; }
  void unfocus() { focus_first_ = 0, focus_count_ = -1; }
  int64_t max_batch() const { return max_batch_; }
  int64_t max_seq() const { return max_seq_; }
  int64_t length(int64_t slot) const { return lengths_[slot]; }
  int64_t max_length() const;  // over the focused slots

  // Static mode, for forwards captured in CUDA graphs (runtime/rollout/cuda_graph_pool.h): while
  // set, batch() is lengths.size(0), lengths_tensor() is `lengths` itself ((B,) int64 on the
  // cache's device, read at replay time, never from the host), write() trusts it, and a forward
  // attends over all max_seq positions (static_span()). Slots [n_slots(), B) may be covered:
  // their writes land in unused slots, past any committed length. Borrowed until cleared; the
  // host-side lengths are not touched (commit afterwards as usual). Requires no focus().
  void set_device_lengths(torch::Tensor lengths) { device_lengths_ = std::move(lengths); }
  void clear_device_lengths() { device_lengths_ = torch::Tensor(); }
  bool static_span() const { return device_lengths_.defined(); }

  // Adds an empty slot at index batch(); returns it. Requires batch() < max_batch().
  int64_t add_slot();
  // Removes `slot`; the last slot moves into its place (its index changes to `slot`).
  void remove_slot(int64_t slot);

  // Committed lengths of the active (focused) slots. (B,) int64 on the cache's device.
  torch::Tensor lengths_tensor() const;

  // Writes new keys/values (B, Hkv, T, D) of `layer` at positions length(b) + t.
  // Requires length(b) + T <= max_seq for every b.
  void write(int64_t layer, const torch::Tensor& k, const torch::Tensor& v);
  // Keys and values of positions [0, S) of the active slots: two (B, Hkv, S, D) views.
  std::pair<torch::Tensor, torch::Tensor> view(int64_t layer, int64_t s) const;

  // Keeps the written tokens at offsets `kept` (relative to the committed length, strictly
  // increasing) as the next kept.size() positions, and advances the length by that much.
  void commit(int64_t slot, const std::vector<int64_t>& kept);
  // Keeps the first n written tokens (a chain or plain decode).
  void commit_prefix(int64_t slot, int64_t n) { lengths_[slot] += n; }
  // Drops committed positions past `length` (length <= length(slot)).
  void truncate(int64_t slot, int64_t length) { lengths_[slot] = length; }
  // Copies positions [0, n) of every layer's keys and values from slot `from` to slot `to`
  // (written, committed or not); lengths are not touched. Requires n <= max_seq().
  void copy_positions(int64_t from, int64_t to, int64_t n);

 private:
  const int64_t max_batch_, max_seq_;
  std::vector<torch::Tensor> k_, v_;  // per layer (max_batch, Hkv, max_seq, D)
  std::vector<int64_t> lengths_;      // committed length of each active slot
  int64_t focus_first_ = 0, focus_count_ = -1;
  torch::Tensor device_lengths_;  // (B,) int64 in static mode, else undefined
};

}  // namespace tlt::model
