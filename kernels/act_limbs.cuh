// One warp's share of ActLimbsFp8 (kernels/expert_fp4_limbs.h), shared by its own launch and the
// one-token router's (kernels/route.cu), which forms the token's limbs beside its routing. No
// product is summed here, so the bits do not depend on the file's FMA contraction.
#pragma once

#include <cstdint>

#include "kernels/device_math.cuh"
#include "kernels/int_limbs.h"

namespace deepinfer::kernels {

/// Bytes of limbs a 32-value block takes (kernels/expert_fp4_limbs.h).
constexpr int64_t kActLimbBlockBytes = 96;

/// The 128-value block `block` of row `row` of x [rows, in], four values a lane: the block's
/// exponent from its amax, each value's e4m3 round trip as an integer count of 2^(e - 9), and
/// that integer's three bytes into the planes of its 32-value block. Every lane must call it.
__device__ __forceinline__ void ActLimbsWarp(const float* __restrict__ x, int64_t in, int64_t row,
                                             int64_t block, uint8_t* __restrict__ limbs,
                                             float* __restrict__ scales, int lane) {
  const float4 v = reinterpret_cast<const float4*>(x + row * in + block * 128)[lane];
  float amax = fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
  }
  const int e = E4M3ScaleExponent(amax, kActAmaxFloor);
  const float values[4] = {v.x, v.y, v.z, v.w};
  uint32_t plane[3] = {0, 0, 0};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    // An e4m3 value is a multiple of 2^-9 of at most 448: q is an exact integer, |q| <= 229,376.
    const int q = __float2int_rn(ldexpf(QdqE4M3(values[k], e), 9 - e));
    uint32_t low, mid, top;
    SplitLimbs(q, &low, &mid, &top);
    plane[0] |= low << (8 * k);
    plane[1] |= mid << (8 * k);
    plane[2] |= top << (8 * k);
  }
  uint8_t* out =
      limbs + (row * (in / 32) + block * 4 + lane / 8) * kActLimbBlockBytes + 4 * (lane % 8);
#pragma unroll
  for (int p = 0; p < 3; ++p) *reinterpret_cast<uint32_t*>(out + 32 * p) = plane[p];
  if (lane == 0) scales[row * (in / 128) + block] = ldexpf(1.0f, e - 10);
}

}  // namespace deepinfer::kernels
