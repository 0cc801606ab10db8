// One warp per row: lane l holds values 16l .. 16l + 15, so four lanes make one 64-value block
// (lanes 0..27 the e4m3 part, 28..31 the RoPE part).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/device_math.cuh"
#include "kernels/kv_row.cuh"
#include "kernels/launch.cuh"

namespace deepinfer::kernels {
namespace {

constexpr int kWarps = 8;

__global__ void __launch_bounds__(kWarps * 32)
    PackKvRowsKernel(const float* __restrict__ rows, int64_t n, const int32_t* __restrict__ dest,
                     uint8_t* __restrict__ packed) {
  AwaitProducers();
  const int lane = threadIdx.x & 31;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (r >= n) return;
  const int64_t to = dest != nullptr ? dest[r] : r;
  if (to < 0) return;  // a row the step does not store (no compressor window closed)
  const float4* src = reinterpret_cast<const float4*>(rows + r * kKvRowValues) + 4 * lane;
  float v[16];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const float4 f = __ldg(src + k);
    v[4 * k] = f.x;
    v[4 * k + 1] = f.y;
    v[4 * k + 2] = f.z;
    v[4 * k + 3] = f.w;
  }
  uint8_t* out = packed + to * kKvRowBytes;
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

__global__ void __launch_bounds__(kWarps * 32)
    UnpackKvRowsKernel(const uint8_t* __restrict__ packed, int64_t n,
                       const int32_t* __restrict__ src, float* __restrict__ rows) {
  AwaitProducers();
  const int lane = threadIdx.x & 31;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (r >= n) return;
  const uint8_t* in = packed + (src != nullptr ? src[r] : r) * kKvRowBytes;
  float v[16];
  KvRowChunk(in, 2 * lane, v);
  KvRowChunk(in, 2 * lane + 1, v + 8);
  float4* dst = reinterpret_cast<float4*>(rows + r * kKvRowValues) + 4 * lane;
#pragma unroll
  for (int k = 0; k < 4; ++k)
    dst[k] = make_float4(v[4 * k], v[4 * k + 1], v[4 * k + 2], v[4 * k + 3]);
}

bool Aligned(const void* p, uintptr_t bytes) {
  return (reinterpret_cast<uintptr_t>(p) & (bytes - 1)) == 0;
}

}  // namespace

int PackKvRows(const float* rows, int64_t n, uint8_t* packed, void* stream, const int32_t* dest) {
  if (n < 0 || !Aligned(rows, 16) || !Aligned(packed, 8)) return cudaErrorInvalidValue;
  if (n == 0) return 0;
  LaunchKernel(PackKvRowsKernel, static_cast<unsigned>((n + kWarps - 1) / kWarps), kWarps * 32, 0,
               static_cast<cudaStream_t>(stream), rows, n, dest, packed);
  return cudaGetLastError();
}

int UnpackKvRows(const uint8_t* packed, int64_t n, float* rows, void* stream, const int32_t* src) {
  if (n < 0 || !Aligned(rows, 16) || !Aligned(packed, 8)) return cudaErrorInvalidValue;
  if (n == 0) return 0;
  LaunchKernel(UnpackKvRowsKernel, static_cast<unsigned>((n + kWarps - 1) / kWarps), kWarps * 32, 0,
               static_cast<cudaStream_t>(stream), packed, n, src, rows);
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
