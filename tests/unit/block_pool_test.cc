// The block pool and paged rows: appends across blocks, sharing by copy, copy on write of a
// shared partial block, recycling, and that a sequence resumed from a prefix snapshot shares the
// snapshot's blocks instead of copying them.
#include "engine/cache/block_pool.h"

#include <gtest/gtest.h>

#include "engine/backend/backend.h"
#include "engine/cache/prefix_cache.h"
#include "engine/model/model.h"
#include "engine/model/tiny_checkpoint.h"
#include "tests/unit/test_util.h"

namespace deepinfer {
namespace {

std::vector<float> Row(int width, float v) { return std::vector<float>(width, v); }

TEST(BlockPoolTest, RowsSpanBlocksAndCopiesShareThem) {
  auto pool = BlockPool::Create();
  const int width = 4096;  // four rows per 64 KiB block
  PagedRows rows(pool, width);
  ASSERT_EQ(rows.rows_per_block(), 4);
  for (int i = 0; i < 6; ++i) rows.Append(Row(width, static_cast<float>(i)).data());
  EXPECT_EQ(rows.size(), 6);
  EXPECT_EQ(pool->stats().blocks_in_use, 2u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(rows.row(i)[width - 1], static_cast<float>(i));
  int runs = 0;
  rows.ForEachRun(6, [&](int64_t first, const float* r, int64_t count) {
    EXPECT_EQ(r, rows.row(first));
    EXPECT_EQ(count, first == 0 ? 4 : 2);
    ++runs;
  });
  EXPECT_EQ(runs, 2);

  PagedRows copy = rows;  // shares both blocks
  EXPECT_EQ(pool->stats().blocks_in_use, 2u);
  copy.Append(Row(width, 100).data());  // the shared partial block is copied first
  EXPECT_EQ(pool->stats().blocks_in_use, 3u);
  EXPECT_EQ(rows.size(), 6);
  EXPECT_EQ(copy.row(6)[0], 100.0f);
  EXPECT_EQ(copy.row(5)[0], 5.0f);
  EXPECT_EQ(rows.row(5)[0], 5.0f);
  EXPECT_EQ(rows.ToVector().size(), 6u * width);

  copy = PagedRows();
  EXPECT_EQ(pool->stats().blocks_in_use, 2u);
  EXPECT_EQ(pool->stats().blocks_free, 1u);
  rows.Append(Row(width, 6).data());  // no longer shared: fills its own block in place
  EXPECT_EQ(pool->stats().blocks_in_use, 2u);
}

TEST(BlockPoolTest, ResumedSequencesShareTheSnapshotsRows) {
  testing::TempDir dir;
  ASSERT_TRUE(MakeTinyCheckpoint(TinySpec{}, dir.path()).ok());
  auto ck = LoadCheckpoint(dir.path());
  auto be = MakeCpuBackend(1);
  Model m(**ck, *be, Numerics::kExact);
  std::vector<int32_t> toks(256);
  for (int i = 0; i < 256; ++i) toks[i] = (i * 7 + 3) % 512;
  std::vector<float> logits(256 * 512);
  {
    SequenceState s = m.NewSequence();
    ASSERT_TRUE(m.Forward(s, toks, logits.data(), nullptr).ok());
    PrefixCache cache(uint64_t{1} << 30);
    cache.Insert(toks, s);
    const uint64_t one = m.block_pool_stats().blocks_in_use;
    ASSERT_GT(one, 0u);
    std::vector<SequenceState> resumed(4);
    std::vector<int32_t> longer = toks;
    longer.push_back(9);
    for (auto& r : resumed) ASSERT_EQ(cache.Lookup(longer, &r), 256);
    // Four more holders of the same rows, no new blocks.
    EXPECT_EQ(m.block_pool_stats().blocks_in_use, one);
    for (auto& r : resumed) {
      ASSERT_TRUE(
          m.Forward(r, std::span<const int32_t>(&longer.back(), 1), logits.data(), nullptr).ok());
    }
  }
  EXPECT_EQ(m.block_pool_stats().blocks_in_use, 0u);  // everything went back to the pool
}

}  // namespace
}  // namespace deepinfer
