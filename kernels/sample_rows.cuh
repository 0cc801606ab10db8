// A draw's row of logits as the GPU sampler's kernels read it (kernels/sampling.cu,
// sample_greedy.cu, sample_topk.cu): through the step's row index, masked ids at -inf.
#pragma once

#include <cmath>
#include <cstdint>

namespace deepinfer::kernels {

/// Draw `row`'s logits: logits row rows_of[row] (rows_of null: row itself), an id whose bit is
/// clear in the draw's mask row of `bitmask` (null: no mask) reading -inf.
struct MaskedRow {
  const float* x;
  const uint32_t* mask;

  __device__ static MaskedRow Of(const float* logits, int32_t vocab, const uint32_t* bitmask,
                                 const int32_t* rows_of, int64_t row) {
    return {logits + (rows_of ? static_cast<int64_t>(rows_of[row]) : row) * vocab,
            bitmask ? bitmask + row * ((vocab + 31) / 32) : nullptr};
  }
  __device__ float operator[](int64_t id) const {
    return mask && !((mask[id / 32] >> (id % 32)) & 1u) ? -INFINITY : x[id];
  }
};

}  // namespace deepinfer::kernels
