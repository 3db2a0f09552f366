#include "runtime/tst/stream.h"

#include <algorithm>
#include <numeric>
#include <sstream>

namespace tlt::tst {

PackedStream::PackedStream(std::vector<std::vector<int32_t>> docs, uint64_t seed)
    : docs_(std::move(docs)), seed_(seed) {
  for (const auto& d : docs_) total_ += int64_t(d.size());
  shuffle();
}

void PackedStream::shuffle() {
  order_.resize(docs_.size());
  std::iota(order_.begin(), order_.end(), 0);
  std::mt19937_64 rng(seed_ * 1000003ull + uint64_t(epoch_));
  std::shuffle(order_.begin(), order_.end(), rng);
}

std::vector<int64_t> PackedStream::next(int64_t rows, int64_t n, int64_t s) {
  std::vector<int64_t> out;
  out.reserve(size_t(rows * n));
  int64_t empty_docs = 0;
  while (int64_t(out.size()) < rows * n) {
    const std::vector<int32_t>& d = docs_[order_[doc_]];
    int64_t usable = int64_t(d.size()) / s * s;
    offset_ = (offset_ + s - 1) / s * s;  // bags start at multiples of s
    if (offset_ >= usable) {
      if (usable == 0 && ++empty_docs > int64_t(docs_.size())) break;  // nothing fits a bag
      offset_ = 0;
      if (++doc_ == int64_t(docs_.size())) {
        doc_ = 0;
        ++epoch_;
        shuffle();
      }
      continue;
    }
    int64_t take = std::min(usable - offset_, rows * n - int64_t(out.size()));
    out.insert(out.end(), d.begin() + offset_, d.begin() + offset_ + take);
    offset_ += take;
    tokens_read_ += take;
  }
  return out;
}

std::string PackedStream::state() const {
  std::ostringstream s;
  s << epoch_ << " " << doc_ << " " << offset_ << " " << tokens_read_;
  return s.str();
}

bool PackedStream::restore(const std::string& state) {
  std::istringstream s(state);
  int64_t epoch, doc, offset, read;
  if (!(s >> epoch >> doc >> offset >> read)) return false;
  epoch_ = epoch;
  shuffle();
  doc_ = doc, offset_ = offset, tokens_read_ = read;
  return doc_ >= 0 && doc_ < int64_t(docs_.size());
}

}  // namespace tlt::tst
