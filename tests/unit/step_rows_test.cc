// The device forward's cache addresses (engine/backend/cuda/step_rows.h) against the CPU
// forward's rules, counted out token by token: a compressed row is emitted exactly when a window
// of `ratio` tokens closes, row j of a sequence is its j-th, a query sees every row emitted so
// far, the ring keeps the last W positions, and no two slots share a pool row.
#include "engine/backend/cuda/step_rows.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace deepinfer {
namespace {

TEST(StepRowsTest, CompressedRowsFollowTheClosedWindows) {
  const int W = 8;
  const int64_t slots = 3, max_context = 64;
  for (int ratio : {4, 16}) {
    const int64_t R = max_context / ratio;
    for (int32_t slot = 0; slot < slots; ++slot) {
      int64_t emitted = 0;
      std::vector<int32_t> written;  // pool row of each compressed row, as written
      for (int64_t pos = 0; pos < max_context; ++pos) {
        const CacheRows c = CacheRowsFor(ratio, R, W, slots, slot, pos);
        const bool closes = (pos + 1) % ratio == 0;  // CompressorPoolToken's rule
        if (closes) {
          EXPECT_EQ(c.comp_dest, slot * R + emitted) << "ratio " << ratio << " pos " << pos;
          EXPECT_EQ(c.comp_pos, pos + 1 - ratio);  // the window's first token
          written.push_back(c.comp_dest);
          ++emitted;
        } else {
          EXPECT_EQ(c.comp_dest, -1);
        }
        EXPECT_EQ(c.visible, emitted);
        EXPECT_EQ(c.page, slot);
        // Through the page table (BuildAttentionRows, page_rows = R), visible row j is read
        // from the pool row it was written to.
        for (int64_t j = 0; j < c.visible; ++j) EXPECT_EQ(c.page * R + j, written[j]);
      }
      EXPECT_EQ(emitted, R);
    }
  }
}

TEST(StepRowsTest, RingsHoldTheLastWindowAndNoTwoRowsCollide) {
  const int W = 8, ratio = 4;
  const int64_t slots = 3, R = 16;
  std::set<int32_t> compressed, rings;  // every slot's rows, by region
  for (int32_t slot = 0; slot < slots; ++slot) {
    std::vector<int32_t> last;
    for (int64_t pos = 0; pos < 40; ++pos) {
      const CacheRows c = CacheRowsFor(ratio, R, W, slots, slot, pos);
      EXPECT_GE(c.ring_row, slots * R);              // rings after every slot's compressed rows
      EXPECT_EQ(c.ring_dest, c.ring_row + pos % W);  // BuildAttentionRows reads it there
      last.push_back(c.ring_dest);
      if (last.size() > static_cast<size_t>(W)) last.erase(last.begin());
      EXPECT_EQ(std::set<int32_t>(last.begin(), last.end()).size(), last.size())
          << "a ring row of the window was overwritten at pos " << pos;
      rings.insert(c.ring_dest);
      if (c.comp_dest >= 0) {
        EXPECT_TRUE(compressed.insert(c.comp_dest).second) << "written twice: " << c.comp_dest;
      }
    }
  }
  // Each slot's ring is W rows of its own; no compressed row lies in a ring.
  EXPECT_EQ(rings.size(), static_cast<size_t>(slots * W));
  for (int32_t row : compressed) EXPECT_EQ(rings.count(row), 0u) << row;
  EXPECT_EQ(compressed.size(), static_cast<size_t>(slots * 40 / ratio));
}

TEST(StepRowsTest, SlidingLayersHaveOnlyARing) {
  const CacheRows c = CacheRowsFor(0, 0, 128, 5, 2, 300);
  EXPECT_EQ(c.visible, 0);
  EXPECT_EQ(c.comp_dest, -1);
  EXPECT_EQ(c.ring_row, 2 * 128);
  EXPECT_EQ(c.ring_dest, 2 * 128 + 300 % 128);
}

}  // namespace
}  // namespace deepinfer
