// Reading and writing the 584-byte cache row (kernels/kv_row.h) on the device, shared by
// UnpackKvRows and the attention kernel that reads rows straight from the cache, and by
// PackKvRows and the fused norm that packs the kv row it made (kernels/fused_glue.h).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "kernels/device_math.cuh"
#include "kernels/kv_row.h"

namespace deepinfer::kernels {

/// Values 8c .. 8c + 7 of a row (64 chunks: 56 of e4m3 bytes, then 8 of bf16 RoPE values),
/// exactly: e4m3 -> fp16 -> fp32 by hardware pair conversions (fp16 holds every e4m3 value,
/// subnormals included), times the block's 2^e. The row is 8-byte aligned.
__device__ __forceinline__ void KvRowChunk(const uint8_t* row, int c, float* v) {
  if (c < kKvNopeValues / 8) {
    const uint2 w = *reinterpret_cast<const uint2*>(row + 8 * c);
    const float scale = E8M0(row[kKvNopeValues + 2 * kKvRopeValues + c / 8]);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const uint32_t word = k < 2 ? w.x : w.y;
      const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(
          static_cast<__nv_fp8x2_storage_t>((word >> (16 * (k % 2))) & 0xffff), __NV_E4M3);
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
      v[2 * k] = f.x * scale;
      v[2 * k + 1] = f.y * scale;
    }
  } else {
    const uint2* src =
        reinterpret_cast<const uint2*>(row + kKvNopeValues) + 2 * (c - kKvNopeValues / 8);
    const uint2 a = src[0], b = src[1];
    const uint32_t word[4] = {a.x, a.y, b.x, b.y};
#pragma unroll
    for (int k = 0; k < 8; ++k)
      v[k] = __uint_as_float(((word[k / 2] >> (16 * (k % 2))) & 0xffff) << 16);
  }
}

/// Packs one row of kKvRowValues floats (16-byte aligned) into `out` (kKvRowBytes, 8-byte
/// aligned) by one warp: lane l loads the row's values 16l .. 16l + 15, so four lanes make one
/// 64-value block (lanes 0..27 the e4m3 part, 28..31 the RoPE part). Plain loads, so the row may
/// have been written by the calling block itself. Every lane of the warp must call it.
__device__ __forceinline__ void PackKvRowWarp(const float* row, uint8_t* out, int lane) {
  const float4* src = reinterpret_cast<const float4*>(row) + 4 * lane;
  float v[16];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const float4 f = src[k];
    v[4 * k] = f.x;
    v[4 * k + 1] = f.y;
    v[4 * k + 2] = f.z;
    v[4 * k + 3] = f.w;
  }
  float amax = 0.0f;  // fmaxf skips NaN, as std::max(amax, |x|) in quant.cc does
#pragma unroll
  for (int k = 0; k < 16; ++k) amax = fmaxf(amax, fabsf(v[k]));
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
  if (lane < kKvNopeValues / 16) {
    const int e = E4M3ScaleExponent(amax, 1e-4f);
    uint32_t word[4] = {0, 0, 0, 0};
#pragma unroll
    for (int k = 0; k < 16; ++k) {
      const float s = ldexpf(v[k], -e);                                   // exact
      const float q = s < -448.0f ? -448.0f : (448.0f < s ? 448.0f : s);  // std::clamp
      word[k / 4] |= ToE4M3(q) << (8 * (k % 4));
    }
    uint2* dst =
        reinterpret_cast<uint2*>(out + 16 * lane);  // rows are 8-byte aligned (584 = 73 x 8)
    dst[0] = make_uint2(word[0], word[1]);
    dst[1] = make_uint2(word[2], word[3]);
    if (lane % 4 == 0)
      out[kKvNopeValues + 2 * kKvRopeValues + lane / 4] = static_cast<uint8_t>(e + 127);
  } else {
    uint32_t word[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const uint32_t lo = __bfloat16_as_ushort(__float2bfloat16_rn(v[2 * k]));
      const uint32_t hi = __bfloat16_as_ushort(__float2bfloat16_rn(v[2 * k + 1]));
      word[k] = lo | (hi << 16);
    }
    uint2* dst = reinterpret_cast<uint2*>(out + kKvNopeValues + 32 * (lane - 28));
#pragma unroll
    for (int k = 0; k < 4; ++k) dst[k] = make_uint2(word[2 * k], word[2 * k + 1]);
    if (lane == 31) out[kKvRowBytes - 1] = 0;
  }
}

}  // namespace deepinfer::kernels
