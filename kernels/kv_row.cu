// One warp per row (PackKvRowWarp, UnpackKvRows' KvRowChunk).
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
  PackKvRowWarp(rows + r * kKvRowValues, packed + to * kKvRowBytes, lane);
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
