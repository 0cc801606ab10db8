// Per-sequence decoding state of DeepSeek-V4 (reference/deepseek-v4.md §4): per layer a
// sliding-window ring, the compressed rows and indexer keys emitted so far, and the compressors'
// partial windows. Prefill of any split followed by decode reproduces one full pass exactly.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/cache/block_pool.h"
#include "engine/model/config.h"
#include "engine/model/slot_stepper.h"
#include "engine/model/weights.h"

namespace deepinfer {

/// The projected rows of the window being compressed (and, for overlapping CSA compressors, of
/// the previous window, whose first-series channels the next row still needs).
struct CompressorState {
  int ratio = 0;
  int proj = 0;  // width of a projected row (2 * row width when overlapping)
  bool overlap = false;
  std::vector<float> kv, gate;  // [(overlap ? 2 : 1) * ratio, proj]

  void Init(const CompressorWeights& w);
};

struct LayerCache {
  int window = 0;
  int head_dim = 0;
  std::vector<float> ring;  // [window, head_dim], slot = position % window
  int64_t ring_from = 0;    // positions below are not in the ring (an approximate resume)
  PagedRows rows;           // compressed rows [n, head_dim], in pool blocks
  PagedRows index_keys;     // indexer keys [n, index_head_dim], in pool blocks
  CompressorState comp, index_comp;

  int64_t n_rows() const { return rows.size(); }
  /// Bytes held by this layer's state.
  size_t bytes() const;
};

struct SequenceState {
  int64_t length = 0;              // tokens processed by the main model
  std::vector<LayerCache> layers;  // empty on the slot path: the stepper holds the caches
  SlotLease slot;                  // the slot path's slot (Model::UseSlots)
  int64_t mtp_length = 0;          // rows processed by the MTP block
  LayerCache mtp;
  size_t bytes() const;
};

}  // namespace deepinfer
