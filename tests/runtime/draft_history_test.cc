// The history index behind the "history" arm (runtime/rollout/draft_history.h): what it drafts
// from finished responses to the same prompt, and its memory bounds. The arm's losslessness is
// rollout_test.cc's (greedy token for token, chi-square, a broken rule caught).
#include <gtest/gtest.h>

#include <vector>

#include "runtime/rollout/draft_history.h"

namespace tlt::rollout {
namespace {

using Tokens = std::vector<int64_t>;

// The tokens along a tree's likeliest path: at each node the best-scoring child (node 0 left
// out).
Tokens first_path(const DraftTree& t) {
  Tokens out;
  int32_t at = 0;
  for (;;) {
    int32_t next = -1;
    for (int32_t i = 1; i < t.size(); ++i)
      if (t.node(i).parent == at && (next < 0 || t.node(i).score > t.node(next).score)) next = i;
    if (next < 0) return out;
    out.push_back(t.node(next).token);
    at = next;
  }
}

Tokens cat(Tokens a, const Tokens& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(HistoryIndex, DraftsWhatASiblingWroteAfterTheSameContext) {
  HistoryIndex h;
  const Tokens prompt{1, 2, 3}, sibling{10, 11, 12, 13, 14, 15};
  h.add(prompt, sibling);
  // Right after the prompt (only the pending token 10 generated): the sibling's continuation.
  DraftTree d = h.draft(prompt, cat(prompt, {10}), 4, 16);
  EXPECT_EQ(d.node(0).token, 10);
  EXPECT_EQ(first_path(d), (Tokens{11, 12, 13, 14}));
  // Mid-response, after a matching n-gram: the rest of the sibling, at most `depth` tokens.
  EXPECT_EQ(first_path(h.draft(prompt, cat(prompt, {10, 11, 12}), 8, 16)), (Tokens{13, 14, 15}));
  // Another prompt's request gets nothing, nor does a context that never occurred.
  EXPECT_EQ(h.draft({9, 9}, {9, 9, 10}, 4, 16).size(), 1);
  EXPECT_EQ(h.draft(prompt, cat(prompt, {77}), 4, 16).size(), 1);
}

TEST(HistoryIndex, TreeKeepsTheCommonestContinuationsWithinItsNodeBudget) {
  HistoryIndex h;
  const Tokens prompt{5, 6};
  h.add(prompt, {20, 21, 22, 23});
  h.add(prompt, {20, 21, 22, 23});
  h.add(prompt, {20, 30, 31, 32});
  DraftTree d = h.draft(prompt, cat(prompt, {20}), 3, 16);
  EXPECT_EQ(d.size(), 7);                          // root + two branches of three
  EXPECT_EQ(first_path(d), (Tokens{21, 22, 23}));  // the branch two responses took
  int32_t c21 = d.child_with_token(0, 21), c30 = d.child_with_token(0, 30);
  ASSERT_GE(c21, 0);
  ASSERT_GE(c30, 0);
  EXPECT_GT(d.node(c21).score, d.node(c30).score);
  // Four nodes: the majority chain wins the budget.
  DraftTree small = h.draft(prompt, cat(prompt, {20}), 3, 4);
  EXPECT_EQ(small.size(), 4);
  EXPECT_EQ(first_path(small), (Tokens{21, 22, 23}));
}

TEST(HistoryIndex, LongerMatchesWinAndOneTokenIsNotEnough) {
  HistoryIndex h;
  const Tokens prompt{1};
  // After "8 7" the continuation is 8; after "6 7" it is 9.
  h.add(prompt, {7, 8, 7, 8, 7, 8});
  h.add(prompt, {6, 7, 9});
  EXPECT_EQ(first_path(h.draft(prompt, {1, 6, 7}, 1, 4)), (Tokens{9}));
  EXPECT_EQ(first_path(h.draft(prompt, {1, 8, 7}, 1, 4)), (Tokens{8}));
  // "7" alone occurred, but a one-token match drafts nothing (kMinOrder).
  EXPECT_EQ(h.draft(prompt, {1, 3, 7}, 1, 4).size(), 1);
}

TEST(HistoryIndex, RareContinuationsAreNotDrafted) {
  HistoryIndex h;
  const Tokens prompt{2, 3};
  for (int i = 0; i < 10; ++i) h.add(prompt, {40, 41});
  h.add(prompt, {40, 99});  // 1 of 11 continuations: below kMinShare
  DraftTree d = h.draft(prompt, cat(prompt, {40}), 1, 8);
  EXPECT_EQ(d.size(), 2);
  EXPECT_EQ(first_path(d), (Tokens{41}));
}

TEST(HistoryIndex, KeepsAtMostMaxResponsesPerPrompt) {
  HistoryIndex h(/*max_responses=*/2, /*max_tokens=*/1000);
  const Tokens prompt{1, 2};
  h.add(prompt, {40, 41});
  h.add(prompt, {50, 51});
  h.add(prompt, {60, 61});
  EXPECT_EQ(h.responses(prompt), 2);
  EXPECT_EQ(h.tokens(), 4);
  EXPECT_EQ(h.draft(prompt, cat(prompt, {40}), 2, 4).size(), 1) << "the oldest was dropped";
  EXPECT_EQ(first_path(h.draft(prompt, cat(prompt, {60}), 2, 4)), (Tokens{61}));
  for (int i = 0; i < 50; ++i) h.add(prompt, {70 + i, 71 + i});  // compaction keeps it right
  EXPECT_EQ(h.responses(prompt), 2);
  EXPECT_EQ(first_path(h.draft(prompt, cat(prompt, {119}), 2, 4)), (Tokens{120}));
  EXPECT_EQ(h.draft(prompt, cat(prompt, {70}), 2, 4).size(), 1);
}

TEST(HistoryIndex, TokenBoundDropsTheLeastRecentlyAddedPrompt) {
  HistoryIndex h(/*max_responses=*/8, /*max_tokens=*/10);
  h.add({1}, {10, 11, 12, 13});
  h.add({2}, {20, 21, 22, 23});
  h.add({1}, {14, 15});  // prompt 1 is now the most recent
  h.add({3}, {30, 31, 32});
  EXPECT_LE(h.tokens(), 10);
  EXPECT_EQ(h.responses({2}), 0) << "prompt 2 was added to least recently";
  EXPECT_EQ(h.responses({1}), 2);
  EXPECT_EQ(h.responses({3}), 1);
  // One prompt alone over the bound keeps only its newest response.
  h.add({4}, Tokens(12, 5));
  EXPECT_EQ(h.prompts(), 1);
  EXPECT_EQ(h.responses({4}), 1);
}

}  // namespace
}  // namespace tlt::rollout
