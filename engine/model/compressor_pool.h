// The compressor's pooling step, shared by the CPU forward (Model::Compress) and the GPU tests
// that check kernels/compress.cu against it.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model/sequence_state.h"
#include "engine/model/weights.h"

namespace deepinfer {

/// Takes token `pos`'s projected rows (kv and gate, st.proj wide each) into the state: kv as is,
/// gate plus the slot's position embedding. When the token closes a window (pos + 1 a multiple
/// of the ratio), writes the window's pooled row [w.width] — per channel, a softmax over the
/// window's slots of the gate weighting the kv; with overlap the previous window supplies its
/// first-series channels and this window its second-series ones — shifts an overlapping state
/// by one window, and returns true. `scratch` is reused across calls (no allocation per window).
bool CompressorPoolToken(const CompressorWeights& w, CompressorState& st, const float* kv,
                         const float* gate, int64_t pos, float* pooled,
                         std::vector<float>& scratch);

}  // namespace deepinfer
