// Packs tokenized documents into training rows so that no bag of s tokens ever mixes two
// documents: each document (with its end-of-document token) is cut to a multiple of s, and
// bags start at multiples of s inside it. Rows of n tokens may hold several documents.
// Documents are visited in a seeded random order, reshuffled every epoch.
//
// Thread safety: none; one trainer owns a stream.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace tlt::tst {

class PackedStream {
 public:
  // docs: token ids of each document, each already ending with the end-of-document token.
  PackedStream(std::vector<std::vector<int32_t>> docs, uint64_t seed);

  // `rows` x `n` tokens, row-major, for bag size `s` (n must be a multiple of s).
  std::vector<int64_t> next(int64_t rows, int64_t n, int64_t s);

  int64_t tokens_read() const { return tokens_read_; }
  int64_t total_tokens() const { return total_; }
  int64_t epoch() const { return epoch_; }
  // Position, for checkpoints: "epoch doc offset tokens_read".
  std::string state() const;
  bool restore(const std::string& state);

 private:
  void shuffle();
  std::vector<std::vector<int32_t>> docs_;
  std::vector<size_t> order_;
  uint64_t seed_;
  int64_t epoch_ = 0, doc_ = 0, offset_ = 0, tokens_read_ = 0, total_ = 0;
};

}  // namespace tlt::tst
