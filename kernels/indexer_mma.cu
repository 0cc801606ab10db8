// The indexer's scores on tensor cores: mma.sync m16n8k16 with bf16 operands and fp32
// accumulation. Keys are the A operand (16 keys x 16 dims, each key's dims contiguous as the
// cache holds them), the query's heads the B operand (16 dims x 8 heads, each head's dims
// contiguous). Warp w owns heads 16w .. 16w + 15 with their fragments in registers for the whole
// block; the four warps' partial sums over their heads are added in a fixed order, so the result
// does not depend on scheduling. In the reference numerics q and keys are FP4 values with
// power-of-two scales, exact in bf16, so the products are exact.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/indexer.h"
#include "kernels/launch.cuh"
#include "kernels/mma_sm90.cuh"

namespace deepinfer::kernels {
namespace {

constexpr int kHeads = 64, kDim = 128, kWarps = 4;
constexpr int kSteps = kDim / 16;  // k-steps of the mma

__device__ __forceinline__ uint32_t PackBf16(float lo, float hi) {
  const uint32_t a = __bfloat16_as_ushort(__float2bfloat16_rn(lo));
  const uint32_t b = __bfloat16_as_ushort(__float2bfloat16_rn(hi));
  return a | (b << 16);
}

// KeysPerBlock: 256 amortises the query's fragments; 64 and 16 give small batches enough blocks.
template <int kKeysPerBlock>
__global__ void __launch_bounds__(kWarps * 32)
    IndexerMmaKernel(const float* __restrict__ q, const float* __restrict__ w,
                     const uint16_t* __restrict__ keys, int64_t key_stride,
                     const int32_t* __restrict__ key_set, const int32_t* __restrict__ key_counts,
                     int64_t n_keys, float* __restrict__ out) {
  AwaitProducers();
  __shared__ float partial[kWarps][kKeysPerBlock];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int64_t b = blockIdx.y, j0 = static_cast<int64_t>(blockIdx.x) * kKeysPerBlock;
  // Keys past the query's count are not scored (uniform over the block); n_keys stays the
  // row stride of `out`.
  int64_t n_valid = n_keys;
  if (key_counts != nullptr) {
    const int64_t count = key_counts[b] < 0 ? 0 : key_counts[b];
    if (count < n_valid) n_valid = count;
    if (j0 >= n_valid) return;
  }
  // This warp's heads as B fragments: b0 holds dims k0 + 2t, +1 of head n0 + g, b1 dims +8, +9.
  uint32_t bq[2][kSteps][2];
  float wh[2][2];
#pragma unroll
  for (int nt = 0; nt < 2; ++nt) {
    const int n0 = 16 * warp + 8 * nt;
    const float* qh = q + (b * kHeads + n0 + g) * kDim;
#pragma unroll
    for (int ks = 0; ks < kSteps; ++ks) {
      const float2 lo = *reinterpret_cast<const float2*>(qh + 16 * ks + 2 * t);
      const float2 hi = *reinterpret_cast<const float2*>(qh + 16 * ks + 2 * t + 8);
      bq[nt][ks][0] = PackBf16(lo.x, lo.y);
      bq[nt][ks][1] = PackBf16(hi.x, hi.y);
    }
    wh[nt][0] = w[b * kHeads + n0 + 2 * t];  // the heads of accumulator columns 2t, 2t + 1
    wh[nt][1] = w[b * kHeads + n0 + 2 * t + 1];
  }
  const uint16_t* kb = keys + (key_set != nullptr ? key_set[b] : b) * key_stride;
  for (int mt = 0; mt < kKeysPerBlock / 16; ++mt) {
    const int64_t m0 = j0 + 16 * mt;
    if (m0 >= n_valid) break;                                    // uniform over the block
    const int64_t r0 = m0 + g < n_valid ? m0 + g : n_valid - 1;  // rows past the end: clamped,
    const int64_t r1 = m0 + g + 8 < n_valid ? m0 + g + 8 : n_valid - 1;  // never written
    const uint32_t* k0p = reinterpret_cast<const uint32_t*>(kb + r0 * kDim) + t;
    const uint32_t* k1p = reinterpret_cast<const uint32_t*>(kb + r1 * kDim) + t;
    float c[2][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}};
#pragma unroll
    for (int ks = 0; ks < kSteps; ++ks) {
      const uint32_t a0 = __ldg(k0p + 8 * ks), a1 = __ldg(k1p + 8 * ks);
      const uint32_t a2 = __ldg(k0p + 8 * ks + 4), a3 = __ldg(k1p + 8 * ks + 4);
      MmaBf16(c[0], a0, a1, a2, a3, bq[0][ks][0], bq[0][ks][1]);
      MmaBf16(c[1], a0, a1, a2, a3, bq[1][ks][0], bq[1][ks][1]);
    }
    // c[nt]: (key m0 + g, heads 2t, 2t + 1 of the tile), then (key m0 + g + 8, the same heads).
    float s0 = 0, s1 = 0;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      s0 += wh[nt][0] * fmaxf(c[nt][0], 0.0f) + wh[nt][1] * fmaxf(c[nt][1], 0.0f);
      s1 += wh[nt][0] * fmaxf(c[nt][2], 0.0f) + wh[nt][1] * fmaxf(c[nt][3], 0.0f);
    }
    s0 += __shfl_xor_sync(0xffffffffu, s0, 1);
    s0 += __shfl_xor_sync(0xffffffffu, s0, 2);
    s1 += __shfl_xor_sync(0xffffffffu, s1, 1);
    s1 += __shfl_xor_sync(0xffffffffu, s1, 2);
    if (t == 0) {
      partial[warp][16 * mt + g] = s0;
      partial[warp][16 * mt + g + 8] = s1;
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < kKeysPerBlock; i += kWarps * 32) {
    if (j0 + i < n_valid)
      out[b * n_keys + j0 + i] = (partial[0][i] + partial[1][i]) + (partial[2][i] + partial[3][i]);
  }
}

}  // namespace

int IndexerScoresMma(const float* q, const float* w, int64_t batch, int heads, const uint16_t* keys,
                     int64_t key_stride, int64_t n_keys, float* out, void* stream,
                     const int32_t* key_set, const int32_t* key_counts) {
  const bool aligned = (reinterpret_cast<uintptr_t>(q) & 7) == 0 &&
                       (reinterpret_cast<uintptr_t>(keys) & 3) == 0 && key_stride % 2 == 0;
  if (heads != kHeads || !aligned || batch < 0 || n_keys < 0) {
    return static_cast<int>(cudaErrorInvalidValue);
  }
  if (batch == 0 || n_keys == 0) return 0;
  // Two blocks per SM of a 132-SM H200 with 256 keys each; else 64 while that fills the SMs;
  // else 16 (a decode step of a few queries: each block one tile of keys, no chain of tiles). A
  // key's score does not depend on its block's size.
  const bool wide = batch * ((n_keys + 255) / 256) >= 264;
  const int per_block = wide ? 256 : batch * ((n_keys + 63) / 64) >= 132 ? 64 : 16;
  // Queries run along grid.y, which holds at most 65,535: larger batches take several launches.
  constexpr int64_t kMaxGridY = 65535;
  for (int64_t b = 0; b < batch; b += kMaxGridY) {
    const dim3 grid(static_cast<unsigned>((n_keys + per_block - 1) / per_block),
                    static_cast<unsigned>(std::min(kMaxGridY, batch - b)));
    auto kernel = per_block == 256  ? IndexerMmaKernel<256>
                  : per_block == 64 ? IndexerMmaKernel<64>
                                    : IndexerMmaKernel<16>;
    LaunchKernel(kernel, grid, kWarps * 32, 0, static_cast<cudaStream_t>(stream),
                 q + b * heads * kDim, w + b * heads,
                 key_set != nullptr ? keys : keys + b * key_stride, key_stride,
                 key_set != nullptr ? key_set + b : nullptr,
                 key_counts != nullptr ? key_counts + b : nullptr, n_keys, out + b * n_keys);
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace deepinfer::kernels
