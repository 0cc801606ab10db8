// The host side of a device-forward step (engine/backend/cuda/device_step.h): how its rows (as
// CheckStepRows in engine/model/slot_stepper.h accepts them) group into segments (runs of rows of
// one slot: a prompt chunk, or one decode token), their positions, and where each row writes and
// reads in a layer's caches. The pool holds every slot's compressed rows first (slot s at s * R ..
// s * R + R - 1, R = max_context / ratio) and then the rings (slot s's `ring` rows from slots_total
// * R + s * ring). Computed from positions alone, so the step's graph only reads them; plain C++
// (unit-tested without a GPU).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/model/slot_stepper.h"  // CheckStepRows, the rows a step accepts

namespace deepinfer {

/// Ring rows per slot for a sliding window of `window` positions when a step may append up to
/// `max_chunk` rows to one sequence: its first row still reads the `window - 1` positions before
/// the chunk, which the chunk's later rows must not overwrite, so the ring holds window +
/// max_chunk - 1 positions (position p in row p % ring).
inline int RingRows(int window, int max_chunk) { return window + max_chunk - 1; }

struct CacheRows {
  int32_t ring_row = 0;    // pool row of the slot's ring slot 0
  int32_t ring_dest = 0;   // pool row the token's KV row goes to
  int32_t page = 0;        // the page (of R rows) holding the slot's compressed rows
  int32_t visible = 0;     // compressed rows the token may see once this step has run
  int32_t comp_dest = -1;  // pool row of the compressed row the token closes, or -1
  int64_t comp_pos = 0;    // position of that window's first token (the row's RoPE position)
};

/// The token at `pos` of the sequence in `slot` for a layer of compress ratio `ratio` (0: sliding
/// window only, R = 0), `rows_per_slot` = R, `ring` rows per slot's ring (RingRows), `slots_total`
/// slots in all.
inline CacheRows CacheRowsFor(int ratio, int64_t rows_per_slot, int ring, int64_t slots_total,
                              int32_t slot, int64_t pos) {
  const int64_t m = ratio, R = rows_per_slot;
  CacheRows c;
  c.ring_row = static_cast<int32_t>(slots_total * R + slot * int64_t{ring});
  c.ring_dest = static_cast<int32_t>(c.ring_row + pos % ring);
  c.page = slot;
  c.visible = m ? static_cast<int32_t>(std::min((pos + 1) / m, R)) : 0;
  c.comp_dest = m && (pos + 1) % m == 0 ? static_cast<int32_t>(slot * R + (pos + 1) / m - 1) : -1;
  c.comp_pos = pos + 1 - m;
  return c;
}

/// Consecutive pool rows, from one slot's region to another's.
struct RowRun {
  int64_t from_row = 0, to_row = 0, rows = 0;
};
/// What a copy of slot `from` into slot `to` after `length` tokens moves in a layer's pool
/// (CacheRowsFor's layout): the compressed rows closed so far, and the whole ring (a row's place
/// in it follows from its position alone). The indexer keys follow the compressed rows' indices.
struct SlotCopyRuns {
  RowRun compressed, ring;
};
inline SlotCopyRuns SlotCopyRunsFor(int ratio, int64_t rows_per_slot, int ring, int64_t slots_total,
                                    int32_t from, int32_t to, int64_t length) {
  const int64_t R = rows_per_slot;
  SlotCopyRuns r;
  r.compressed = {from * R, to * R, ratio > 0 ? std::min(length / ratio, R) : 0};
  r.ring = {slots_total * R + from * int64_t{ring}, slots_total * R + to * int64_t{ring}, ring};
  return r;
}

/// Host arrays of a step's input block that follow from its rows (bucket entries each;
/// seg_begin bucket + 1).
struct StepRowArrays {
  int32_t* tokens;
  int32_t* slot;
  int64_t* pos;
  int64_t* seg_begin;  // segment k: rows seg_begin[k] .. seg_begin[k + 1]
  int32_t* seg_slot;   // segment k's slot (its compressor states)
};

/// Lays out checked rows for a launch of `bucket` rows: a segment per run of one slot's rows at
/// that sequence's next positions; each padding row (past the real ones) its own segment of
/// `spare_slot` at position 0 (a slot only padding touches); then empty segments, so a launch
/// always has `bucket` segments.
inline void LayOutStepRows(std::span<const int32_t> slots, std::span<const int32_t> tokens,
                           const int64_t* lengths, int32_t spare_slot, int bucket,
                           const StepRowArrays& out) {
  const int rows = static_cast<int>(slots.size());
  int segments = 0;
  int64_t offset = 0;
  for (int i = 0; i < bucket; ++i) {
    const bool real = i < rows;
    const int32_t s = real ? slots[i] : spare_slot;
    if (!real || i == 0 || slots[i - 1] != s) {
      out.seg_begin[segments] = i;
      out.seg_slot[segments] = s;
      ++segments;
      offset = 0;
    } else {
      ++offset;
    }
    out.tokens[i] = real ? tokens[i] : 0;
    out.slot[i] = s;
    out.pos[i] = real ? lengths[s] + offset : 0;
  }
  for (int k = segments; k <= bucket; ++k) {
    out.seg_begin[k] = bucket;
    if (k < bucket) out.seg_slot[k] = spare_slot;
  }
}

}  // namespace deepinfer
