// Reading the 584-byte cache row (kernels/kv_row.h) on the device, shared by UnpackKvRows and
// the attention kernel that reads rows straight from the cache.
#pragma once

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

}  // namespace deepinfer::kernels
