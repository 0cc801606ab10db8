// The compressors' state update and pooling on the device (CSA's overlapping windows of 4, HCA's
// windows of 128): what engine/model/compressor_pool.h's CompressorPoolToken computes, bit for
// bit, for every token of a step. Device pointers; `stream` is a cudaStream_t as void*; returns
// the CUDA error code (0 on success).
#pragma once

#include <cstdint>

#include "kernels/exact_math.h"  // DI_HOST_DEVICE

namespace deepinfer::kernels {

struct CompressorShape {
  int ratio = 0;         // tokens per window
  int width = 0;         // pooled row width
  bool overlap = false;  // two series: projections and state are 2 * width wide
  DI_HOST_DEVICE int proj() const { return overlap ? 2 * width : width; }
  /// Floats of one sequence's kv (and of its gate) state.
  DI_HOST_DEVICE int64_t state_floats() const { return int64_t{overlap ? 2 : 1} * ratio * proj(); }
};

/// Segment i (one sequence) holds tokens seg_begin[i] .. seg_begin[i + 1] at consecutive
/// positions pos[t], with projected rows kv[t * row_stride ..] and gate[t * row_stride ..]
/// (proj floats each; a fused wkv|wgate product passes its halves with row_stride 2 * proj); its
/// state is
/// slot state_slot[i] (i when null) of kv_state and gate_state, state_floats() each. Every
/// token's rows enter the state (gate plus ape[slot]); a token that closes a window writes
/// pooled[t * width ..] and emitted[t] = 1 (else 0). ape: [ratio, proj] on the device.
int CompressorPool(const CompressorShape& shape, const float* kv, const float* gate,
                   int64_t row_stride, const float* ape, const int64_t* pos,
                   const int64_t* seg_begin, int64_t segments, const int32_t* state_slot,
                   float* kv_state, float* gate_state, float* pooled, int32_t* emitted,
                   void* stream);

}  // namespace deepinfer::kernels
