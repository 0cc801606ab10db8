// RoPE's rotation of one channel pair and the FP8 round trip of one 128-wide block, as device
// helpers shared by the fused kernels (kernels/fused_glue.cu, kernels/mqa_decode.cu). Every
// product and sum is rounded by an intrinsic, so the results are RopeKernel's and QdqFp8Kernel's
// bits whether or not the including file contracts to FMA.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/device_math.cuh"
#include "kernels/fused_glue.h"

namespace deepinfer::kernels {

/// RopeKernel's cosine and sine for pair index i of a head at `position` (the sine negated to
/// undo the rotation).
__device__ __forceinline__ void RopeCosSin(int64_t position, int i, const RopeArgs& rope, float* c,
                                           float* s) {
  const float angle = __fmul_rn(static_cast<float>(position), rope.inv_freq[i]);
  *c = static_cast<float>(cos(static_cast<double>(angle)));
  *s = static_cast<float>(sin(static_cast<double>(angle)));
  if (rope.inverse) *s = -*s;
}

/// The rotation of the pair (a, b) by an angle of cosine c and sine s, as RopeKernel rounds it.
__device__ __forceinline__ void RotateBy(float& a, float& b, float c, float s) {
  const float a0 = a, b0 = b;
  a = __fsub_rn(__fmul_rn(a0, c), __fmul_rn(b0, s));
  b = __fadd_rn(__fmul_rn(b0, c), __fmul_rn(a0, s));
}

/// RopeKernel's rotation of the pair (a, b) at pair index i of a head at `position`.
__device__ __forceinline__ void RotatePair(float& a, float& b, int64_t position, int i,
                                           const RopeArgs& rope) {
  float c, s;
  RopeCosSin(position, i, rope, &c, &s);
  RotateBy(a, b, c, s);
}

/// QdqFp8Kernel's rounding of one 128-wide block held four values a lane (v[k] at c0 + k of a
/// row of `dim` values), written to row_fp8. Every lane of the warp must call it.
__device__ __forceinline__ void StoreQdqBlock(const float (&v)[4], int64_t c0, int64_t dim,
                                              float* row_fp8) {
  float amax = 0.0f;
#pragma unroll
  for (int k = 0; k < 4; ++k) amax = fmaxf(amax, fabsf(c0 + k < dim ? v[k] : 0.0f));
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
  }
  const int e = E4M3ScaleExponent(amax, kActAmaxFloor);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    if (c0 + k < dim) row_fp8[c0 + k] = QdqE4M3(v[k], e);
  }
}

}  // namespace deepinfer::kernels
