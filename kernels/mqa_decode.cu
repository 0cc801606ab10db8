#include <cuda_runtime.h>

#include <algorithm>
#include <array>

#include "kernels/kv_row.cuh"
#include "kernels/launch.cuh"
#include "kernels/mqa_decode.h"
#include "kernels/mqa_mma.h"
#include "kernels/rope_qdq.cuh"

namespace deepinfer::kernels {
namespace {

// kHeadsPerBlock: the most heads a block takes (large batches); small batches give a block 8 or
// 4 so that more blocks share the step's few queries.
constexpr int kDim = 512, kHeadsPerBlock = 16, kTile = 32, kThreads = 256;
// Blocks a launch aims for (two per SM of a 132-SM H200); so a query has at most this many splits.
constexpr int kTargetBlocks = 264, kMaxSplits = kTargetBlocks;
constexpr int kPad = kDim + 4;  // row stride: float4 reads of 8 rows cover the 32 banks once
template <int kHeads>
constexpr int kSmemFloats = kHeads* kDim + kTile* kPad + kHeads* kTile;

// Block (query, kHeads heads, split): online softmax over the split's rows in tiles of 32 rows
// held in shared memory. Thread t scores rows (t % 32) for heads t / 32 + 8j, then accumulates
// channels 2t, 2t + 1 of all kHeads heads. Writes the split's max, sum and unnormalised output
// per head; a head's sums are the same whatever kHeads. Fp8Rows: rows in the 584-byte layout
// (kernels/kv_row.h), decoded exactly into the same fp32 values the tile would hold after
// UnpackKvRows.
template <bool Fp8Rows, int kHeads>
__global__ void __launch_bounds__(kThreads)
    MqaSplitKernel(const float* __restrict__ q, const void* __restrict__ rows_any,
                   const int32_t* __restrict__ row_index, const int64_t* __restrict__ offsets,
                   int heads, float scale, int splits, float* __restrict__ partial) {
  AwaitProducers();
  extern __shared__ float4 smem4[];
  float* qs = reinterpret_cast<float*>(smem4);  // [16][512]
  float* ks = qs + kHeads * kDim;               // [32][516]
  float* ps = ks + kTile * kPad;                // [16][32]
  __shared__ float m_s[kHeads], l_s[kHeads], alpha_s[kHeads];
  const int64_t t = blockIdx.x;
  const int h0 = blockIdx.y * kHeads, split = blockIdx.z;
  const int64_t n = offsets[t + 1] - offsets[t];
  const int64_t chunk = (n + splits - 1) / splits;
  const int64_t begin = (split * chunk < n ? split * chunk : n),
                end = begin + chunk < n ? begin + chunk : n;
  const float* rows = static_cast<const float*>(rows_any);
  const uint8_t* rows8 = static_cast<const uint8_t*>(rows_any);
  const float* base = rows + offsets[t] * kDim;
  const float4* qg = reinterpret_cast<const float4*>(q + (t * heads + h0) * kDim);
  for (int i = threadIdx.x; i < kHeads * kDim / 4; i += kThreads) {
    reinterpret_cast<float4*>(qs)[i] = qg[i];
  }
  if (threadIdx.x < kHeads) {
    m_s[threadIdx.x] = -INFINITY;
    l_s[threadIdx.x] = 0;
  }
  float acc[kHeads][2] = {};
  const int e_mine = threadIdx.x % kTile, h_mine = threadIdx.x / kTile;
  for (int64_t tile = begin; tile < end; tile += kTile) {
    __syncthreads();  // the previous tile's rows and weights are no longer read
    if constexpr (Fp8Rows) {
      // 64 chunks of 8 values per row: 56 of e4m3 bytes, 8 of bf16 RoPE values.
      for (int i = threadIdx.x; i < kTile * 64; i += kThreads) {
        const int r = i / 64, chunk = i % 64;
        float v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        if (tile + r < end) {
          const int64_t entry =
              row_index ? row_index[offsets[t] + tile + r] : offsets[t] + tile + r;
          KvRowChunk(rows8 + entry * kKvRowBytes, chunk, v);
        }
        float4* dst = reinterpret_cast<float4*>(ks + r * kPad + 8 * chunk);
        dst[0] = make_float4(v[0], v[1], v[2], v[3]);
        dst[1] = make_float4(v[4], v[5], v[6], v[7]);
      }
    } else {
      for (int i = threadIdx.x; i < kTile * kDim / 4; i += kThreads) {
        const int r = i / (kDim / 4), c = i % (kDim / 4);
        float4 v = make_float4(0, 0, 0, 0);
        if (tile + r < end) {
          const float* row =
              row_index ? rows + static_cast<int64_t>(row_index[offsets[t] + tile + r]) * kDim
                        : base + (tile + r) * kDim;
          v = reinterpret_cast<const float4*>(row)[c];
        }
        reinterpret_cast<float4*>(ks + r * kPad)[c] = v;
      }
    }
    __syncthreads();
    const float4* kr = reinterpret_cast<const float4*>(ks + e_mine * kPad);
    for (int hh = h_mine; hh < kHeads; hh += kThreads / kTile) {
      const float4* qr = reinterpret_cast<const float4*>(qs + hh * kDim);
      float dot = 0;
#pragma unroll 8
      for (int d = 0; d < kDim / 4; ++d) {
        const float4 a = qr[d], b = kr[d];
        dot += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
      }
      ps[hh * kTile + e_mine] = tile + e_mine < end ? dot * scale : -INFINITY;
    }
    __syncthreads();
    if (threadIdx.x < kHeads) {  // online softmax bookkeeping, one thread per head
      float* p = ps + threadIdx.x * kTile;
      float mx = m_s[threadIdx.x];
      for (int e = 0; e < kTile; ++e) mx = fmaxf(mx, p[e]);
      const float alpha = expf(m_s[threadIdx.x] - mx);  // 0 on the first tile (exp(-inf))
      float sum = 0;
      for (int e = 0; e < kTile; ++e) sum += (p[e] = expf(p[e] - mx));
      l_s[threadIdx.x] = l_s[threadIdx.x] * alpha + sum;
      m_s[threadIdx.x] = mx;
      alpha_s[threadIdx.x] = alpha;
    }
    __syncthreads();
    const int c = 2 * threadIdx.x;
#pragma unroll
    for (int hh = 0; hh < kHeads; ++hh) {
      acc[hh][0] *= alpha_s[hh];
      acc[hh][1] *= alpha_s[hh];
    }
    for (int e = 0; e < kTile; ++e) {
      const float2 v = *reinterpret_cast<const float2*>(ks + e * kPad + c);
#pragma unroll
      for (int hh = 0; hh < kHeads; ++hh) {
        const float p = ps[hh * kTile + e];
        acc[hh][0] += p * v.x;
        acc[hh][1] += p * v.y;
      }
    }
  }
  __syncthreads();
  // partial[t][split][h] = {m, l, acc[512]}
  for (int hh = 0; hh < kHeads; ++hh) {
    float* out = partial + ((t * splits + split) * heads + h0 + hh) * (kDim + 2);
    if (threadIdx.x == 0) {
      out[0] = m_s[hh];
      out[1] = l_s[hh];
    }
    out[2 + 2 * threadIdx.x] = acc[hh][0];
    out[3 + 2 * threadIdx.x] = acc[hh][1];
  }
}

// Block (query, head): the splits' maxima and sums with the sink give the softmax denominator.
// With RopeQdq the block then applies `rope` (the output's inverse rotation) to the head's
// trailing channels and writes the row's FP8 round trip to o_fp8, as Rope and QdqFp8Rows would
// after it (kernels/rope_qdq.cuh): a warp per 128-wide block, four channels a lane.
// v[k] += partial channel c0 + k of split s times weight[s], for the splits in order, skipping
// those of weight 0. The values of kBatch splits are loaded before any is added: a load inside
// the chain of additions left one memory latency per split on the combine's path.
template <int N>
__device__ __forceinline__ void AddWeightedSplits(const float* p, int64_t stride, int splits,
                                                  const float* weight, int c0, float (&v)[N]) {
  constexpr int kBatch = 8;
  for (int s0 = 0; s0 < splits; s0 += kBatch) {
    float x[kBatch][N];
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      if (s0 + i >= splits) continue;
#pragma unroll
      for (int k = 0; k < N; ++k) x[i][k] = p[(s0 + i) * stride + 2 + c0 + k];
    }
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const float w = s0 + i < splits ? weight[s0 + i] : 0.0f;
      if (w == 0.0f) continue;
#pragma unroll
      for (int k = 0; k < N; ++k) v[k] = __fadd_rn(v[k], __fmul_rn(x[i][k], w));
    }
  }
}

template <bool RopeQdq>
__global__ void __launch_bounds__(kThreads)
    MqaCombineKernel(const float* __restrict__ partial, int heads, int splits,
                     const float* __restrict__ sinks, float* __restrict__ o, RopeArgs rope,
                     float* __restrict__ o_fp8) {
  AwaitProducers();
  const int64_t t = blockIdx.x;
  const int h = blockIdx.y;
  const float* p = partial + (t * splits * heads + h) * (kDim + 2);
  const int64_t stride = static_cast<int64_t>(heads) * (kDim + 2);
  // Each split's weight exp(m - max), 0 for an empty split, once per block: the channels then
  // cost a load and two roundings a split instead of an exponential.
  __shared__ float weight[kMaxSplits];
  __shared__ float weighted_sum[kMaxSplits];  // each split's l times its weight
  __shared__ float shared_denom;
  const int lane = threadIdx.x & 31;
  if (threadIdx.x < 32) {
    float mx = sinks[h];
    for (int s = lane; s < splits; s += 32) mx = fmaxf(mx, p[s * stride]);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
    for (int s = lane; s < splits; s += 32) {
      const float m = p[s * stride], l = p[s * stride + 1];
      const float w = m == -INFINITY ? 0.0f : expf(m - mx);
      weight[s] = w;
      weighted_sum[s] = __fmul_rn(l, w);
    }
    __syncwarp();
    if (lane == 0) {  // the splits in order, from shared memory: no load in the chain
      float denom = expf(sinks[h] - mx);
      for (int s = 0; s < splits; ++s) {
        if (weight[s] != 0.0f) denom = __fadd_rn(denom, weighted_sum[s]);
      }
      shared_denom = denom;
    }
  }
  __syncthreads();
  const float denom = shared_denom;
  float* out = o + (t * heads + h) * kDim;
  if constexpr (!RopeQdq) {
    for (int c = threadIdx.x; c < kDim; c += kThreads) {
      float v[1] = {0.0f};
      AddWeightedSplits(p, stride, splits, weight, c, v);
      out[c] = __fdiv_rn(v[0], denom);  // rounded the same in both forms of the kernel
    }
  } else {
    const int first = kDim - rope.rope_dim;
    for (int c0 = (threadIdx.x >> 5) * 128 + 4 * lane; c0 < kDim; c0 += kThreads * 4) {
      // Channels c0 .. c0 + 3 in one pass over the splits: each channel's roundings in the same
      // order as one at a time, four independent chains.
      float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      AddWeightedSplits(p, stride, splits, weight, c0, v);
#pragma unroll
      for (int k = 0; k < 4; ++k) v[k] = __fdiv_rn(v[k], denom);
#pragma unroll
      for (int k = 0; k < 4; k += 2) {
        if (c0 + k >= first)
          RotatePair(v[k], v[k + 1], rope.positions[t], (c0 + k - first) / 2, rope);
      }
#pragma unroll
      for (int k = 0; k < 4; ++k) out[c0 + k] = v[k];
      StoreQdqBlock(v, int64_t{h} * kDim + c0, int64_t{heads} * kDim, o_fp8 + t * heads * kDim);
    }
  }
}

}  // namespace

int64_t MqaDecodeScratch(int64_t n_queries, int heads, int head_dim, int max_splits) {
  return n_queries * max_splits * heads * (head_dim + 2);
}

namespace {

// Blocks of the split kernel resident at once on the device, for 16, 8 and 4 heads a block
// (shared memory decides: 2, 2 and 3 a block per SM on the H200).
template <bool Fp8Rows>
const std::array<int64_t, 3>& WaveSlots() {
  static const std::array<int64_t, 3> slots = [] {
    int device = 0, sms = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    const auto resident = [&](auto kernel, int smem) {
      int per_sm = 0;
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, smem);
      return int64_t{per_sm} * sms;
    };
    return std::array<int64_t, 3>{
        resident(MqaSplitKernel<Fp8Rows, 16>, kSmemFloats<16> * sizeof(float)),
        resident(MqaSplitKernel<Fp8Rows, 8>, kSmemFloats<8> * sizeof(float)),
        resident(MqaSplitKernel<Fp8Rows, 4>, kSmemFloats<4> * sizeof(float))};
  }();
  return slots;
}

// The CUDA-core split pass: its split count to *splits.
template <bool Fp8Rows>
cudaError_t LaunchCudaCoreSplits(const float* q, const void* rows, const int32_t* row_index,
                                 const int64_t* offsets, int64_t n_queries, int heads, float scale,
                                 int64_t max_rows, int max_splits, float* scratch, cudaStream_t s,
                                 int* splits_out) {
  // Enough blocks for two per SM of a 132-SM H200, no split under one tile of rows; then fewer
  // heads per block while the blocks still fit in one wave (more would make a second one:
  // measured 1 % slower steps at batch 8-64). The splits follow the 16-head count, so the head
  // grouping changes no sum.
  const int64_t blocks = n_queries * (heads / kHeadsPerBlock);
  int splits =
      static_cast<int>(std::min<int64_t>((kTargetBlocks + blocks - 1) / blocks, max_splits));
  splits = static_cast<int>(
      std::max<int64_t>(1, std::min<int64_t>(splits, (max_rows + kTile - 1) / kTile)));
  static_assert(kMaxSplits >= kTargetBlocks, "the combine holds a weight per split");
  int group = kHeadsPerBlock;
  const std::array<int64_t, 3>& slots = WaveSlots<Fp8Rows>();
  while (group > 4 && heads % (group / 2) == 0 &&
         n_queries * (heads / (group / 2)) * splits <= slots[group == 16 ? 1 : 2]) {
    group /= 2;
  }
  *splits_out = splits;
  const auto launch = [&](auto kernel, int heads_per_block, int smem) {
    const cudaError_t attr =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (attr != cudaSuccess) return attr;
    LaunchKernel(kernel, dim3(static_cast<unsigned>(n_queries), heads / heads_per_block, splits),
                 kThreads, smem, s, q, rows, row_index, offsets, heads, scale, splits, scratch);
    return cudaSuccess;
  };
  return group == 16  ? launch(MqaSplitKernel<Fp8Rows, 16>, 16, kSmemFloats<16> * sizeof(float))
         : group == 8 ? launch(MqaSplitKernel<Fp8Rows, 8>, 8, kSmemFloats<8> * sizeof(float))
                      : launch(MqaSplitKernel<Fp8Rows, 4>, 4, kSmemFloats<4> * sizeof(float));
}

// The tensor-core split pass (kernels/mqa_mma.cu) takes every cache-row launch of 64 heads: it
// was faster at every batch measured but the HCA layer at batch 1 (H200, bench/RESULTS-gpu.md
// "Attention on tensor cores": batch 1 CSA 23.0 -> 19.5 us, HCA 14.4 -> 15.4; batch 8
// 106 -> 39 and 32 -> 18; batch 64 484 -> 122 and 169 -> 67).
// Blocks the tensor-core pass aims for: one an SM (its shared memory allows one).
int64_t MmaTargetBlocks() {
  static const int64_t sms = [] {
    int device = 0, count = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device);
    return int64_t{count > 0 ? count : 132};
  }();
  return sms;
}

enum class SplitPass { kAuto, kTensorCores };

template <bool Fp8Rows>
int Launch(const float* q, const void* rows, const int32_t* row_index, const int64_t* offsets,
           int64_t n_queries, int heads, int head_dim, const float* sinks, float scale,
           int64_t max_rows, int max_splits, float* scratch, float* o, void* stream,
           const RopeArgs* out_rope = nullptr, float* o_fp8 = nullptr,
           SplitPass pass = SplitPass::kAuto) {
  // scratch 8-byte aligned: the combine reads a split's channels as float2.
  const bool aligned = (reinterpret_cast<uintptr_t>(q) & 15) == 0 &&
                       (reinterpret_cast<uintptr_t>(rows) & (Fp8Rows ? 7 : 15)) == 0 &&
                       (reinterpret_cast<uintptr_t>(scratch) & 7) == 0;
  if (head_dim != kDim || heads < kHeadsPerBlock || heads % kHeadsPerBlock != 0 || max_splits < 1 ||
      !aligned || (out_rope != nullptr) != (o_fp8 != nullptr) ||
      (out_rope != nullptr &&
       (out_rope->heads != heads || out_rope->head_dim != kDim || out_rope->rope_dim < 0 ||
        out_rope->rope_dim > kDim || out_rope->rope_dim % 4 != 0))) {
    return static_cast<int>(cudaErrorInvalidValue);
  }
  const bool mma = Fp8Rows && heads == kMqaMmaHeads;
  if (pass == SplitPass::kTensorCores && !mma) return static_cast<int>(cudaErrorInvalidValue);
  if (n_queries == 0) return 0;
  auto s = static_cast<cudaStream_t>(stream);
  int splits = 1;
  if (mma) {
    const int64_t blocks = n_queries * kMqaMmaHeadBlocks;
    splits = static_cast<int>(std::max<int64_t>(
        1, std::min<int64_t>({(MmaTargetBlocks() + blocks - 1) / blocks, max_splits,
                              (max_rows + kMqaMmaTile - 1) / kMqaMmaTile})));
    if (const int e = LaunchMqaMmaSplits(q, static_cast<const uint8_t*>(rows), row_index, offsets,
                                         n_queries, scale, splits, scratch, stream)) {
      return e;
    }
  } else if (const cudaError_t e =
                 LaunchCudaCoreSplits<Fp8Rows>(q, rows, row_index, offsets, n_queries, heads, scale,
                                               max_rows, max_splits, scratch, s, &splits)) {
    return static_cast<int>(e);
  }
  const dim3 combine(static_cast<unsigned>(n_queries), heads);
  if (out_rope != nullptr) {
    LaunchKernel(MqaCombineKernel<true>, combine, kThreads, 0, s, scratch, heads, splits, sinks, o,
                 *out_rope, o_fp8);
  } else {
    LaunchKernel(MqaCombineKernel<false>, combine, kThreads, 0, s, scratch, heads, splits, sinks, o,
                 RopeArgs{}, nullptr);
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int MqaDecode(const float* q, const float* rows, const int32_t* row_index, const int64_t* offsets,
              int64_t n_queries, int heads, int head_dim, const float* sinks, float scale,
              int64_t max_rows, int max_splits, float* scratch, float* o, void* stream) {
  return Launch<false>(q, rows, row_index, offsets, n_queries, heads, head_dim, sinks, scale,
                       max_rows, max_splits, scratch, o, stream);
}

int MqaDecodeFp8Rows(const float* q, const uint8_t* rows, const int32_t* row_index,
                     const int64_t* offsets, int64_t n_queries, int heads, int head_dim,
                     const float* sinks, float scale, int64_t max_rows, int max_splits,
                     float* scratch, float* o, void* stream, const RopeArgs* out_rope,
                     float* o_fp8) {
  return Launch<true>(q, rows, row_index, offsets, n_queries, heads, head_dim, sinks, scale,
                      max_rows, max_splits, scratch, o, stream, out_rope, o_fp8);
}

int MqaMmaFp8Rows(const float* q, const uint8_t* rows, const int32_t* row_index,
                  const int64_t* offsets, int64_t n_queries, int heads, int head_dim,
                  const float* sinks, float scale, int64_t max_rows, int max_splits, float* scratch,
                  float* o, void* stream, const RopeArgs* out_rope, float* o_fp8) {
  return Launch<true>(q, rows, row_index, offsets, n_queries, heads, head_dim, sinks, scale,
                      max_rows, max_splits, scratch, o, stream, out_rope, o_fp8,
                      SplitPass::kTensorCores);
}

}  // namespace deepinfer::kernels
