// Small device helpers the kernels share: the e4m3 and e8m0 decoders, a warp-wide sum and the
// GEMVs' split-column finish.
#pragma once

#include <cuda_fp8.h>

#include <cstdint>

namespace deepinfer::kernels {

/// 2^(e - 127) for an e8m0 scale byte, built from bits (e = 0 is the subnormal 2^-127; 0xff is
/// NaN), so no rounding mode or flush-to-zero setting matters — engine/model/quant.h's
/// E8M0ToF32 on the device.
__device__ __forceinline__ float E8M0(uint32_t e) {
  if (e == 0xff) return __int_as_float(0x7fc00000);
  return e == 0 ? __int_as_float(0x00400000) : __int_as_float(static_cast<int>(e << 23));
}

/// An e4m3fn byte as a float (0x7f/0xff are NaN), exactly — engine/model/quant.h's E4M3ToF32.
__device__ __forceinline__ float E4M3(uint32_t b) {
  const int exp = (b >> 3) & 0xf, man = b & 0x7;
  if (exp == 0xf && man == 0x7) return __int_as_float(0x7fc00000);
  const float mag = exp == 0 ? static_cast<float>(man) * 0x1p-9f
                             : __int_as_float(((exp + 120) << 23) | (man << 20));
  return (b & 0x80) ? -mag : mag;
}

/// e4m3 byte of a value already clamped to [-448, 448], as quant.cc's F32ToE4M3: round to
/// nearest, ties to even; NaN -> 0x7F; the sign survives rounding to zero.
__device__ __forceinline__ uint32_t ToE4M3(float q) {
  if (isnan(q)) return 0x7f;
  uint32_t b = static_cast<uint32_t>(__nv_cvt_float_to_fp8(q, __NV_SATFINITE, __NV_E4M3));
  if ((b & 0x7f) == 0) b = signbit(q) ? 0x80u : 0u;
  return b;
}

/// quant.cc's Pow2ScaleExponent(amax, fmt_max, floor) = int(ceil(log2f(max(amax, floor) /
/// fmt_max))): the power of two that brings a block's largest value into the format's range.
/// glibc's log2f is correctly rounded where it matters (just above a power of two, where float
/// rounding decides whether the ceil steps up); the double log2 rounded to float reproduces it:
/// checked for every float in [2^-30, 2^100] on the host (ceil agrees for all 1.09e9 of them).
__device__ __forceinline__ int Pow2ScaleExponent(float amax, float fmt_max, float floor) {
  const float a = amax < floor ? floor : amax;
  const float ratio = a / fmt_max;  // IEEE division (no fast-math in this build)
  return static_cast<int>(ceilf(static_cast<float>(log2(static_cast<double>(ratio)))));
}

/// The e4m3 block exponent (fmt_max 448).
__device__ __forceinline__ int E4M3ScaleExponent(float amax, float floor) {
  return Pow2ScaleExponent(amax, 448.0f, floor);
}

/// The amax floor of the reference numerics' activation blocks (quant.cc).
constexpr float kActAmaxFloor = 1e-4f;

/// One activation's FP8 round trip in a 128-wide block whose scale is 2^e (e from
/// E4M3ScaleExponent of the block's amax and kActAmaxFloor): the reference numerics' QDQ.
__device__ __forceinline__ float QdqE4M3(float v, int e) {
  const float s = ldexpf(v, -e);
  const float q = s < -448.0f ? -448.0f : (448.0f < s ? 448.0f : s);
  return ldexpf(E4M3(ToE4M3(q)), e);
}

/// The magnitudes an e2m1 nibble's low three bits encode (quant.cc's E2M1ToF32).
__device__ __forceinline__ float E2M1Magnitude(uint32_t code) {
  constexpr float kMag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  return kMag[code & 7];
}

/// A 64-bit key that orders (value, id) pairs as the CPU's TopKIndices does: larger value first,
/// equal values by the lower id, -0 equal to +0. Every key of distinct ids is distinct.
__device__ __forceinline__ uint64_t RankKey(float v, int64_t id) {
  uint32_t u = __float_as_uint(v == 0.0f ? 0.0f : v);
  u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  return (static_cast<uint64_t>(u) << 32) | (0xffffffffu - static_cast<uint32_t>(id));
}

/// The sum of a value over the 32 lanes of a warp (every lane gets it).
__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

/// The sum of a value over a block of Threads threads (every thread gets it): warp sums, then the
/// warps' sums in order, so the result does not depend on scheduling. Every thread must call it;
/// it may be called again right after.
template <int Threads>
__device__ __forceinline__ float BlockSum(float v) {
  __shared__ float partial[Threads / 32];
  v = WarpSum(v);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
  __syncthreads();
  float s = 0;
#pragma unroll
  for (int w = 0; w < Threads / 32; ++w) s += partial[w];
  __syncthreads();  // partial may be reused by the next reduction
  return s;
}

/// Finishes a GEMV whose outputs are Outs x Rows dots per warp, where groups of `split`
/// consecutive warps (split a power of two up to the block's warps) took interleaved slices of
/// the same dots' columns, so that short dots still fill the GPU. acc: this lane's partial sums;
/// red: shared memory of (block warps) * Outs * Rows floats. Calls store(j, r, total) once per
/// dot; slices are added in warp order, so totals do not depend on scheduling, and split == 1
/// sums exactly as one warp alone. Every thread of the block must call it (active: whether the
/// warp's outputs exist).
template <int Outs, int Rows, class Store>
__device__ __forceinline__ void FinishSplitDots(float (&acc)[Outs][Rows], int split, bool active,
                                                float* red, Store store) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (split == 1) {
    if (!active) return;
#pragma unroll
    for (int j = 0; j < Outs; ++j) {
#pragma unroll
      for (int r = 0; r < Rows; ++r) {
        const float v = WarpSum(acc[j][r]);
        if (lane == 0) store(j, r, v);
      }
    }
    return;
  }
  constexpr int kDots = Outs * Rows;
  if (active) {
#pragma unroll
    for (int j = 0; j < Outs; ++j) {
#pragma unroll
      for (int r = 0; r < Rows; ++r) {
        const float v = WarpSum(acc[j][r]);
        if (lane == 0) red[warp * kDots + j * Rows + r] = v;
      }
    }
  }
  __syncthreads();
  if (!active || warp % split != 0) return;
  for (int k = lane; k < kDots; k += 32) {
    float s = 0;
    for (int q = 0; q < split; ++q) s += red[(warp + q) * kDots + k];
    store(k / Rows, k % Rows, s);
  }
}

}  // namespace deepinfer::kernels
