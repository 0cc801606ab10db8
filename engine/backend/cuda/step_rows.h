// Where one decode row of the device forward writes and reads in a layer's caches (the layout of
// engine/backend/cuda/device_step.h): the pool holds every slot's compressed rows first (slot s
// at s * R .. s * R + R - 1, R = max_context / ratio) and then the rings (slot s's W rows from
// slots_total * R + s * W). Computed on the host from positions alone, so the step's graph only
// reads them; plain C++ (unit-tested without a GPU).
#pragma once

#include <algorithm>
#include <cstdint>

namespace deepinfer {

struct CacheRows {
  int32_t ring_row = 0;    // pool row of the slot's ring slot 0
  int32_t ring_dest = 0;   // pool row the token's KV row goes to
  int32_t page = 0;        // the page (of R rows) holding the slot's compressed rows
  int32_t visible = 0;     // compressed rows the token may see once this step has run
  int32_t comp_dest = -1;  // pool row of the compressed row the token closes, or -1
  int64_t comp_pos = 0;    // position of that window's first token (the row's RoPE position)
};

/// The token at `pos` of the sequence in `slot` for a layer of compress ratio `ratio` (0: sliding
/// window only, R = 0), `rows_per_slot` = R, ring of `window` rows, `slots_total` slots in all.
inline CacheRows CacheRowsFor(int ratio, int64_t rows_per_slot, int window, int64_t slots_total,
                              int32_t slot, int64_t pos) {
  const int64_t m = ratio, R = rows_per_slot, W = window;
  CacheRows c;
  c.ring_row = static_cast<int32_t>(slots_total * R + slot * W);
  c.ring_dest = static_cast<int32_t>(c.ring_row + pos % W);
  c.page = slot;
  c.visible = m ? static_cast<int32_t>(std::min((pos + 1) / m, R)) : 0;
  c.comp_dest = m && (pos + 1) % m == 0 ? static_cast<int32_t>(slot * R + (pos + 1) / m - 1) : -1;
  c.comp_pos = pos + 1 - m;
  return c;
}

}  // namespace deepinfer
