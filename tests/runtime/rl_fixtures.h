// Small policies and step batches the RL update tests share (rl_run_test.cc,
// policy_trainer_test.cc): the micro preset in float32 and float64, and long-tailed batches
// with and without GRPO groups.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "runtime/model/config.h"
#include "runtime/model/transformer.h"
#include "runtime/rl/sequences.h"
#include "runtime/rl/text.h"

namespace tlt::rl::test {

inline model::Transformer micro_policy(uint64_t seed) {
  torch::manual_seed(seed);
  return model::Transformer(*model::preset_config("micro", kTextVocab));
}

// The same in float64, where only summation order separates two ways of computing an update.
inline model::Transformer micro_policy64(uint64_t seed) {
  model::Transformer m = micro_policy(seed);
  m->to(torch::kFloat64);
  return m;
}

// `rows` rows of 2..6 prompt tokens; one in six responses 60..90 tokens, the others 1..12.
inline SequenceBatch long_tailed_batch(int64_t rows, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<int64_t>> prompts, responses;
  for (int64_t i = 0; i < rows; ++i) {
    int64_t p = 2 + int64_t(rng() % 5),
            r = i % 6 == 3 ? 60 + int64_t(rng() % 31) : 1 + int64_t(rng() % 12);
    std::vector<int64_t> pr, re;
    for (int64_t j = 0; j < p; ++j) pr.push_back(32 + int64_t(rng() % 90));
    for (int64_t j = 0; j < r; ++j) re.push_back(32 + int64_t(rng() % 90));
    prompts.push_back(pr), responses.push_back(re);
  }
  return make_batch(prompts, responses);
}

// `groups` GRPO groups of 8 samples, one prompt of 18..23 tokens each, long-tailed responses
// (one in eight 60..90 tokens, the others 0..12).
inline SequenceBatch grouped_batch(int64_t groups, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<int64_t>> prompts, responses;
  for (int64_t g = 0; g < groups; ++g) {
    std::vector<int64_t> pr;
    for (int64_t j = 0, p = 18 + int64_t(rng() % 6); j < p; ++j)
      pr.push_back(32 + int64_t(rng() % 90));
    for (int64_t i = 0; i < 8; ++i) {
      int64_t r = i == int64_t(g % 8) ? 60 + int64_t(rng() % 31) : int64_t(rng() % 13);
      std::vector<int64_t> re;
      for (int64_t j = 0; j < r; ++j) re.push_back(32 + int64_t(rng() % 90));
      prompts.push_back(pr), responses.push_back(re);
    }
  }
  return make_batch(prompts, responses);
}

}  // namespace tlt::rl::test
