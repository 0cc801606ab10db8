#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/indexer.h"
#include "kernels/launch.cuh"

namespace deepinfer::kernels {
namespace {

constexpr int kDim = 128, kKeys = 64, kQuarters = 4, kMaxHeads = 64;
constexpr int kPad = kDim + 4;  // a row stride of 132 floats: float4 reads of 8 rows hit 32 banks

// Block (key tile, query): the query's heads and a tile of 64 keys in shared memory; thread
// (quarter, key) takes a quarter of the heads for one key.
__global__ void __launch_bounds__(kKeys* kQuarters)
    IndexerKernel(const float* __restrict__ q, const float* __restrict__ w, int heads,
                  const float* __restrict__ keys, int64_t key_stride, int64_t n_keys,
                  float* __restrict__ out) {
  AwaitProducers();
  extern __shared__ float4 smem[];
  float* qs = reinterpret_cast<float*>(smem);  // [heads][128]
  float* ks = qs + kMaxHeads * kDim;           // [64][132]
  __shared__ float partial[kQuarters][kKeys];
  const int64_t b = blockIdx.y, j0 = static_cast<int64_t>(blockIdx.x) * kKeys;
  const float* qb = q + b * heads * kDim;
  for (int i = threadIdx.x; i < heads * kDim / 4; i += blockDim.x) {
    reinterpret_cast<float4*>(qs)[i] = reinterpret_cast<const float4*>(qb)[i];
  }
  const float* kb = keys + b * key_stride;
  for (int i = threadIdx.x; i < kKeys * kDim / 4; i += blockDim.x) {
    const int row = i / (kDim / 4), col = i % (kDim / 4);
    float4 v = make_float4(0, 0, 0, 0);
    if (j0 + row < n_keys) v = reinterpret_cast<const float4*>(kb + (j0 + row) * kDim)[col];
    reinterpret_cast<float4*>(ks + row * kPad)[col] = v;
  }
  __syncthreads();
  const int key = threadIdx.x % kKeys, quarter = threadIdx.x / kKeys;
  const int per = heads / kQuarters;
  const float* wb = w + b * heads;
  const float4* kr = reinterpret_cast<const float4*>(ks + key * kPad);
  float score = 0;
  for (int h = quarter * per; h < (quarter + 1) * per; ++h) {
    const float4* qr = reinterpret_cast<const float4*>(qs + h * kDim);
    float dot = 0;
#pragma unroll 8
    for (int d = 0; d < kDim / 4; ++d) {
      const float4 a = qr[d], c = kr[d];
      dot += a.x * c.x + a.y * c.y + a.z * c.z + a.w * c.w;
    }
    score += wb[h] * fmaxf(dot, 0.0f);
  }
  partial[quarter][key] = score;
  __syncthreads();
  if (threadIdx.x < kKeys && j0 + threadIdx.x < n_keys) {
    out[b * n_keys + j0 + threadIdx.x] = partial[0][threadIdx.x] + partial[1][threadIdx.x] +
                                         partial[2][threadIdx.x] + partial[3][threadIdx.x];
  }
}

}  // namespace

int IndexerScoresBatch(const float* q, const float* w, int64_t batch, int heads, const float* keys,
                       int64_t key_stride, int64_t n_keys, float* out, void* stream) {
  // float4 loads: q, keys and every query's keys 16-byte aligned.
  const bool aligned = (reinterpret_cast<uintptr_t>(q) & 15) == 0 &&
                       (reinterpret_cast<uintptr_t>(keys) & 15) == 0 && key_stride % 4 == 0;
  if (heads > kMaxHeads || heads % kQuarters != 0 || !aligned) {
    return static_cast<int>(cudaErrorInvalidValue);
  }
  if (batch == 0 || n_keys == 0) return 0;
  const int smem = (kMaxHeads * kDim + kKeys * kPad) * sizeof(float);
  const cudaError_t attr =
      cudaFuncSetAttribute(IndexerKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (attr != cudaSuccess) return static_cast<int>(attr);
  // Queries run along grid.y, which holds at most 65,535: larger batches take several launches.
  constexpr int64_t kMaxGridY = 65535;
  for (int64_t b = 0; b < batch; b += kMaxGridY) {
    const dim3 grid(static_cast<unsigned>((n_keys + kKeys - 1) / kKeys),
                    static_cast<unsigned>(std::min(kMaxGridY, batch - b)));
    LaunchKernel(IndexerKernel, grid, kKeys * kQuarters, smem, static_cast<cudaStream_t>(stream),
                 q + b * heads * kDim, w + b * heads, heads, keys + b * key_stride, key_stride,
                 n_keys, out + b * n_keys);
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace deepinfer::kernels
