#include "runtime/drafter/buffer.h"

#include <algorithm>

namespace tlt::drafter {

rollout::HiddenSink HiddenBuffer::sink() {
  return [this](int64_t id, const std::vector<int64_t>& toks, const torch::Tensor& hidden) {
    Seq& s = seqs_[id];
    s.tokens.insert(s.tokens.end(), toks.begin(), toks.end());
    s.hidden.push_back(hidden.detach().to(torch::kFloat32).clone());  // (n, C)
  };
}

int64_t HiddenBuffer::positions() const {
  int64_t n = 0;
  for (const auto& [id, s] : seqs_) n += int64_t(s.tokens.size());
  return n;
}

std::vector<torch::Tensor> HiddenBuffer::tensors() const {
  int64_t r = int64_t(seqs_.size()), t = 1, c = 0;
  for (const auto& [id, s] : seqs_) {
    t = std::max<int64_t>(t, int64_t(s.tokens.size()));
    if (!s.hidden.empty()) c = s.hidden[0].size(1);
  }
  torch::Tensor tok = torch::zeros({r, t}, torch::kInt64);            // (R, T)
  torch::Tensor hid = torch::zeros({r, t, std::max<int64_t>(c, 1)});  // (R, T, C)
  torch::Tensor mask = torch::zeros({r, t});                          // (R, T)
  torch::Tensor prompts = torch::zeros({r}, torch::kInt64), lens = torch::zeros({r}, torch::kInt64);
  int64_t i = 0;
  for (const auto& [id, s] : seqs_) {
    int64_t n = int64_t(s.tokens.size());
    tok[i].narrow(0, 0, n).copy_(torch::tensor(s.tokens, torch::kInt64));
    if (!s.hidden.empty()) hid[i].narrow(0, 0, n).copy_(torch::cat(s.hidden, 0).narrow(0, 0, n));
    if (n > s.prompt) mask[i].narrow(0, s.prompt, n - s.prompt).fill_(1.0);
    prompts[i] = s.prompt;
    lens[i] = n;
    ++i;
  }
  return {tok, hid, mask, prompts, lens};
}

std::vector<torch::Tensor> sample_windows(const std::vector<std::vector<torch::Tensor>>& buffers,
                                          int64_t b, std::mt19937_64& rng, int64_t window) {
  int64_t total = 0;
  for (const auto& d : buffers) total += d[0].size(0);
  std::vector<torch::Tensor> tok, hid, mask;
  for (int64_t k = 0; k < b; ++k) {
    int64_t r = int64_t(rng() % uint64_t(total));
    size_t f = 0;
    while (r >= buffers[f][0].size(0)) r -= buffers[f][0].size(0), ++f;
    const auto& d = buffers[f];
    int64_t p = d[3][r].item<int64_t>(), n = d[4][r].item<int64_t>();
    int64_t w = std::min(window, n);
    int64_t lo = std::clamp<int64_t>(p - 1, 0, n - w), hi = n - w;
    int64_t start = lo + int64_t(rng() % uint64_t(hi - lo + 1));
    int64_t pad = window - w;
    tok.push_back(torch::constant_pad_nd(d[0][r].narrow(0, start, w), {0, pad}));        // (W)
    hid.push_back(torch::constant_pad_nd(d[1][r].narrow(0, start, w), {0, 0, 0, pad}));  // (W, C)
    mask.push_back(torch::constant_pad_nd(d[2][r].narrow(0, start, w), {0, pad}));       // (W)
  }
  return {torch::stack(tok), torch::stack(hid), torch::stack(mask)};
}

}  // namespace tlt::drafter
