#include "runtime/drafter/buffer.h"

#include <algorithm>

namespace tlt::drafter {

rollout::HiddenSink HiddenBuffer::sink() {
  return [this](int64_t id, const std::vector<int64_t>& toks, const torch::Tensor& hidden) {
    Seq& s = seqs_[id];
    s.tokens.insert(s.tokens.end(), toks.begin(), toks.end());
    s.hidden.push_back(hidden);  // (n, F), the engine's own: no copy
  };
}

int64_t HiddenBuffer::positions() const {
  int64_t n = 0;
  for (const auto& [id, s] : seqs_) n += int64_t(s.tokens.size());
  return n;
}

std::vector<torch::Tensor> HiddenBuffer::tensors() const {
  std::vector<int64_t> tok, offsets{0}, prompts;
  std::vector<torch::Tensor> hid;
  for (const auto& [id, s] : seqs_) {
    int64_t n = int64_t(s.tokens.size());
    int64_t first = std::clamp<int64_t>(s.prompt - kWindow, 0, n);  // no window starts earlier
    tok.insert(tok.end(), s.tokens.begin() + first, s.tokens.end());
    // On the CPU whatever the engine's device: a buffer is written to a file and shipped.
    if (!s.hidden.empty())
      hid.push_back(
          torch::cat(s.hidden, 0).narrow(0, first, n - first).to(torch::kCPU, torch::kFloat32));
    offsets.push_back(offsets.back() + (n - first));
    prompts.push_back(s.prompt - first);
  }
  // (N, F); a buffer without hidden states has none to train on (is_packed_buffer says no).
  torch::Tensor h =
      !hid.empty() && hid.size() == seqs_.size() ? torch::cat(hid, 0) : torch::zeros({0, 1});
  return {torch::tensor(tok, torch::kInt64), h, torch::tensor(offsets, torch::kInt64),
          torch::tensor(prompts, torch::kInt64)};
}

bool is_packed_buffer(const std::vector<torch::Tensor>& d) {
  return d.size() == 4 && d[0].dim() == 1 && d[1].dim() == 2 && d[1].size(0) == d[0].size(0) &&
         d[0].size(0) > 0 && d[2].dim() == 1 && d[3].dim() == 1 && d[3].size(0) > 0 &&
         d[2].size(0) == d[3].size(0) + 1 && d[2].scalar_type() == torch::kInt64 &&
         d[3].scalar_type() == torch::kInt64;
}

std::vector<torch::Tensor> sample_windows(const std::vector<std::vector<torch::Tensor>>& buffers,
                                          int64_t b, std::mt19937_64& rng, int64_t window) {
  int64_t total = 0;
  for (const auto& d : buffers) total += d[3].size(0);
  std::vector<torch::Tensor> tok, hid, mask;
  for (int64_t k = 0; k < b; ++k) {
    int64_t r = int64_t(rng() % uint64_t(total));
    size_t f = 0;
    while (r >= buffers[f][3].size(0)) r -= buffers[f][3].size(0), ++f;
    const auto& d = buffers[f];
    const int64_t* offsets = d[2].data_ptr<int64_t>();
    int64_t row = offsets[r], n = offsets[r + 1] - row, p = d[3].data_ptr<int64_t>()[r];
    int64_t w = std::min(window, n);
    int64_t lo = std::clamp<int64_t>(p - 1, 0, n - w), hi = n - w;
    int64_t start = lo + int64_t(rng() % uint64_t(hi - lo + 1));
    int64_t pad = window - w;
    torch::Tensor in_response = torch::arange(start, start + w, torch::kInt64).ge(p);  // (w,)
    tok.push_back(torch::constant_pad_nd(d[0].narrow(0, row + start, w), {0, pad}));   // (W)
    hid.push_back(
        torch::constant_pad_nd(d[1].narrow(0, row + start, w), {0, 0, 0, pad}));        // (W, F)
    mask.push_back(torch::constant_pad_nd(in_response.to(torch::kFloat32), {0, pad}));  // (W)
  }
  return {torch::stack(tok), torch::stack(hid), torch::stack(mask)};
}

}  // namespace tlt::drafter
