// Prefix sightings (engine/cache/prefix_sightings.h): only block-aligned strict prefixes recorded
// by an earlier context count, the deepest one wins, and the oldest are forgotten past capacity.
#include "engine/cache/prefix_sightings.h"

#include <gtest/gtest.h>

#include <vector>

namespace deepinfer {
namespace {

std::vector<int32_t> Prompt(size_t shared, size_t own, int32_t own_seed) {
  std::vector<int32_t> t;
  for (size_t i = 0; i < shared; ++i) t.push_back(static_cast<int32_t>(7 + 13 * i));
  for (size_t i = 0; i < own; ++i) t.push_back(own_seed + static_cast<int32_t>(i));
  return t;
}

TEST(PrefixSightingsTest, TheDeepestBoundaryAnEarlierContextSharedCounts) {
  PrefixSightings s(100);
  // A system prompt of 300 tokens and different questions: boundaries 128 and 256 are shared.
  const std::vector<int32_t> first = Prompt(300, 40, 100000);
  const std::vector<int32_t> second = Prompt(300, 90, 200000);
  EXPECT_EQ(s.DeepestSeen(first), 0);  // nothing recorded yet
  s.Record(first);
  EXPECT_EQ(s.size(), 2u);  // 128 and 256 (340 tokens: 384 is past the end)
  EXPECT_EQ(s.DeepestSeen(second), 256);
  // A context that leaves the shared tokens before 256 only shares the first block.
  std::vector<int32_t> early = Prompt(200, 100, 300000);
  EXPECT_EQ(s.DeepestSeen(early), 128);
  // A prefix must leave one token after it: a context of exactly 256 tokens shares 128.
  const std::vector<int32_t> exact(first.begin(), first.begin() + 256);
  EXPECT_EQ(s.DeepestSeen(exact), 128);
  // Different first tokens share nothing, whatever follows.
  std::vector<int32_t> other = second;
  other[0] = 5;
  EXPECT_EQ(s.DeepestSeen(other), 0);
  // Recording again adds only what is new (the second prompt's 384 boundary).
  s.Record(second);
  EXPECT_EQ(s.size(), 3u);
  EXPECT_EQ(s.DeepestSeen(Prompt(300, 200, 200000)), 384);
}

TEST(PrefixSightingsTest, TheOldestAreForgottenPastCapacity) {
  PrefixSightings s(3);
  const std::vector<int32_t> a = Prompt(129, 0, 0);    // one boundary
  const std::vector<int32_t> b = Prompt(0, 600, 500);  // four: 128 .. 512
  s.Record(a);
  s.Record(b);
  EXPECT_EQ(s.size(), 3u);
  EXPECT_EQ(s.DeepestSeen(a), 0);  // a's and b's first boundary went first
  EXPECT_EQ(s.DeepestSeen(Prompt(0, 700, 500)), 512);
  EXPECT_EQ(s.DeepestSeen(Prompt(0, 300, 500)), 256);
  PrefixSightings none(0);
  none.Record(a);
  EXPECT_EQ(none.DeepestSeen(a), 0);
}

}  // namespace
}  // namespace deepinfer
