// The host side of a device-forward step (engine/backend/cuda/step_rows.h) against the CPU
// forward's rules, counted out token by token: a compressed row is emitted exactly when a window
// of `ratio` tokens closes, row j of a sequence is its j-th, a query sees every row emitted so
// far, the ring keeps the last W positions (and, grown by a chunk, never loses a row a chunk's
// query reads), no two slots share a pool row; and how a step's rows group into segments.
#include "engine/backend/cuda/step_rows.h"

#include <gtest/gtest.h>

#include <cstdint>
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

// A chunk of C rows writes C ring rows before any of its queries reads; query p reads the window
// positions p - W + 1 .. p, so the rows of positions before the chunk must survive the chunk's
// writes. RingRows makes that hold for every chunk start; a ring of only W rows does not.
TEST(StepRowsTest, GrownRingsKeepWhatAChunkReads) {
  const int W = 8;
  const auto overwritten = [&](int ring, int chunk, int64_t p0) {
    std::set<int32_t> written;
    for (int64_t p = p0; p < p0 + chunk; ++p) {
      written.insert(CacheRowsFor(0, 0, ring, 2, 1, p).ring_dest);
    }
    for (int64_t p = p0; p < p0 + chunk; ++p) {
      for (int64_t q = std::max<int64_t>(0, p - W + 1); q < p0; ++q) {
        if (written.count(CacheRowsFor(0, 0, ring, 2, 1, q).ring_dest)) return true;
      }
    }
    return false;
  };
  for (int chunk : {1, 2, 5, 8, 13}) {
    for (int64_t p0 = 0; p0 < 40; ++p0) {
      EXPECT_FALSE(overwritten(RingRows(W, chunk), chunk, p0)) << chunk << " at " << p0;
    }
  }
  EXPECT_EQ(RingRows(W, 1), W);  // decode steps keep the plain window
  EXPECT_TRUE(overwritten(W, 2, 20));
}

// A slot copy (the device forward's CopySlot) moves exactly what the slot's positions so far
// wrote: each compressed row and ring row CacheRowsFor gives the source for a position below the
// length lies in the copy's runs, at the offset of the row it gives the destination; the
// compressed run is every row the last token could see, and both runs stay in the slot's own
// regions.
TEST(StepRowsTest, ASlotCopyMovesTheRowsItsPositionsWrote) {
  const int64_t slots_total = 4;
  for (auto [ratio, ring] : {std::pair{4, 143}, {128, 143}, {0, 128}, {4, 128}}) {
    const int64_t R = ratio > 0 ? 1024 / ratio : 0;
    for (int64_t length : {0, 1, 3, 4, 127, 128, 129, 300, 1024}) {
      for (auto [from, to] : {std::pair{0, 2}, {3, 1}}) {
        const SlotCopyRuns runs = SlotCopyRunsFor(ratio, R, ring, slots_total, from, to, length);
        const auto inside = [](const RowRun& r, int64_t row) {
          return row >= r.from_row && row < r.from_row + r.rows;
        };
        for (int64_t p = 0; p < length; ++p) {
          const CacheRows a = CacheRowsFor(ratio, R, ring, slots_total, from, p);
          const CacheRows b = CacheRowsFor(ratio, R, ring, slots_total, to, p);
          ASSERT_TRUE(inside(runs.ring, a.ring_dest)) << ratio << " " << length << " " << p;
          EXPECT_EQ(a.ring_dest - runs.ring.from_row, b.ring_dest - runs.ring.to_row);
          if (a.comp_dest >= 0) {
            ASSERT_TRUE(inside(runs.compressed, a.comp_dest)) << ratio << " " << length;
            EXPECT_EQ(a.comp_dest - runs.compressed.from_row, b.comp_dest - runs.compressed.to_row);
          }
        }
        const int64_t seen =
            length > 0 ? CacheRowsFor(ratio, R, ring, slots_total, from, length - 1).visible : 0;
        EXPECT_EQ(runs.compressed.rows, seen) << ratio << " " << length;
        EXPECT_EQ(runs.compressed.from_row, from * R);
        EXPECT_EQ(runs.compressed.to_row, to * R);
        EXPECT_EQ(runs.ring.rows, ring);
        EXPECT_EQ(runs.ring.from_row, CacheRowsFor(ratio, R, ring, slots_total, from, 0).ring_row);
        EXPECT_EQ(runs.ring.to_row, CacheRowsFor(ratio, R, ring, slots_total, to, 0).ring_row);
      }
    }
  }
}

TEST(StepRowsTest, RowsGroupIntoSegmentsOfOneSlot) {
  const int bucket = 8;
  const int64_t lengths[5] = {2, 7, 0, 5, 0};
  const std::vector<int32_t> slots = {3, 3, 3, 1, 0, 0}, tokens = {10, 11, 12, 13, 14, 15};
  std::vector<int32_t> tok(bucket), slot(bucket), seg_slot(bucket);
  std::vector<int64_t> pos(bucket), seg_begin(bucket + 1);
  LayOutStepRows(slots, tokens, lengths, 4, bucket,
                 {tok.data(), slot.data(), pos.data(), seg_begin.data(), seg_slot.data()});
  EXPECT_EQ(tok, (std::vector<int32_t>{10, 11, 12, 13, 14, 15, 0, 0}));
  EXPECT_EQ(slot, (std::vector<int32_t>{3, 3, 3, 1, 0, 0, 4, 4}));
  // Each run continues its sequence; padding rows sit at position 0 of the spare slot.
  EXPECT_EQ(pos, (std::vector<int64_t>{5, 6, 7, 7, 2, 3, 0, 0}));
  EXPECT_EQ(seg_begin, (std::vector<int64_t>{0, 3, 4, 6, 7, 8, 8, 8, 8}));
  EXPECT_EQ(seg_slot, (std::vector<int32_t>{3, 1, 0, 4, 4, 4, 4, 4}));
}

}  // namespace
}  // namespace deepinfer
