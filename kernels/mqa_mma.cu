// V4's attention on tensor cores for many queries at once (prompt chunks, large decode batches).
// A block takes one query and 32 of its 64 heads, so each cache row decoded into shared memory
// serves 32 heads: the heads are the M of mma.sync m16n8k16 (bf16 operands, fp32 sums), as in
// FlashMLA. The rows' values (e4m3 times a power of two, and the bf16 RoPE values) are exact in
// bf16; the fp32 query and the fp32 softmax weights are each split into three bf16 parts (24
// significant bits), so every product is exact and only the sums' order and the tensor cores'
// accumulation differ from the CUDA-core kernel: three times the bf16 work, still a fraction of
// what CUDA cores spend.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/device_math.cuh"
#include "kernels/kv_row.h"
#include "kernels/launch.cuh"
#include "kernels/mma_sm90.cuh"
#include "kernels/mqa_mma.h"

namespace deepinfer::kernels {
namespace {

constexpr int kDim = kMqaMmaDim, kHeads = kMqaMmaHeads, kTile = kMqaMmaTile, kThreads = 256;
constexpr int kBlockHeads = kHeads / kMqaMmaHeadBlocks;  // three parts of 32 heads fit
constexpr int kParts = 3;            // bf16 parts of an fp32 factor: 3 x 8 significant bits
constexpr int kStride = kDim + 8;    // bf16 a row of Q and of the tile: 1,040 bytes, so the eight
                                     // rows an ldmatrix reads fall in distinct banks
constexpr int kPStride = kTile + 8;  // bf16 a head's weights (80 bytes, likewise)
constexpr int kSStride = kTile + 1;  // floats a head's logits
constexpr int kRawWords = kKvRowBytes / 8;  // a cache row is 73 words of 8 bytes
constexpr int kChunks = kDim / 8;           // a row's 8-value chunks: 56 of e4m3, 8 of bf16

// A block's shared memory (~164 KB: one block an SM). The raw rows of the next tile arrive by
// cp.async while the block works on the current one.
struct Smem {
  uint16_t q[kParts][kBlockHeads * kStride];   // the query's bf16 parts
  uint16_t kv[kTile * kStride];                // the tile's rows in bf16
  uint2 raw[kTile * kRawWords];                // cache rows as stored
  uint16_t p[kParts][kBlockHeads * kPStride];  // the weights' bf16 parts
  float logit[2][kBlockHeads * kSStride];      // over two halves of the channels
  float alpha[kBlockHeads];                    // each head's rescaling of its output for this tile
};

// ldmatrix rows and the decoder's stores are 16-byte pieces; cp.async moves 8-byte words.
static_assert(offsetof(Smem, kv) % 16 == 0 && offsetof(Smem, p) % 16 == 0 &&
                  (kBlockHeads * kStride * 2) % 16 == 0 && (kBlockHeads * kPStride * 2) % 16 == 0,
              "16-byte aligned tiles");
static_assert(offsetof(Smem, raw) % 8 == 0 && kKvRowBytes % 8 == 0, "8-byte words");
static_assert(sizeof(Smem) <= 227 * 1024, "one block's shared memory on sm_90");

// Two floats as kParts bf16 pairs: the rounded values, then the rounded remainders (each
// difference exact in fp32), the first float in the low half as the mma reads a register. Three
// parts hold all 24 bits of an fp32 value, so products with exact bf16 values are exact.
__device__ __forceinline__ void SplitPair(float a, float b, uint32_t (&parts)[kParts]) {
#pragma unroll
  for (int i = 0; i < kParts; ++i) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    const float2 hf = __bfloat1622float2(h);
    a -= hf.x;
    b -= hf.y;
    parts[i] = *reinterpret_cast<const uint32_t*>(&h);
  }
}

// Two e4m3 values (the low 16 bits) times the block's power of two as a bf16 pair, exactly as
// KvRowChunk decodes them into fp32; bf16 then holds them exactly: four significant bits, and
// PackKvRows' scale floor (1e-4 / 448, an exponent of -21 at least) keeps them far above bf16's
// smallest values.
__device__ __forceinline__ uint32_t E4m3PairToBf16(uint32_t pair, float scale) {
  const __half2_raw h =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(pair & 0xffff), __NV_E4M3);
  const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
  const __nv_bfloat162 b = __floats2bfloat162_rn(f.x * scale, f.y * scale);
  return *reinterpret_cast<const uint32_t*>(&b);
}

__device__ __forceinline__ const uint8_t* Bytes(const uint16_t* p) {
  return reinterpret_cast<const uint8_t*>(p);
}

// Block (query, half of the heads, split). Tensor cores truncate as they accumulate (each sum cut
// to its largest term's 24 bits), so a long chain of mma into one accumulator drifts: each 32
// channels of a logit and each tile of an output sum afresh and join their totals in fp32.
__global__ void __launch_bounds__(kThreads, 1)
    MqaMmaKernel(const float* __restrict__ q, const uint8_t* __restrict__ rows,
                 const int32_t* __restrict__ row_index, const int64_t* __restrict__ offsets,
                 float scale, int splits, float* __restrict__ partial) {
  AwaitProducers();
  extern __shared__ __align__(16) uint8_t smem_block[];
  Smem& sm = *reinterpret_cast<Smem*>(smem_block);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t4 = lane & 3;
  const int64_t t = blockIdx.x;
  const int h0 = blockIdx.y * kBlockHeads, split = blockIdx.z;
  const int64_t first = offsets[t], n = offsets[t + 1] - first;
  const int64_t chunk = (n + splits - 1) / splits;
  const int64_t begin = split * chunk < n ? split * chunk : n;
  const int64_t end = begin + chunk < n ? begin + chunk : n;

  // Copier and decoder: eight threads a row of the tile.
  const int copy_row = tid >> 3, part = tid & 7;
  auto fetch = [&](int64_t tile) {
    if (tile + copy_row < end) {
      const int64_t e = first + tile + copy_row;
      const int64_t entry = row_index != nullptr ? row_index[e] : e;
      const uint2* src = reinterpret_cast<const uint2*>(rows + entry * kKvRowBytes);
      uint2* dst = sm.raw + copy_row * kRawWords;
      for (int w = part; w < kRawWords; w += 8) CpAsync8(dst + w, src + w);
    }
    CpAsyncCommit();
  };
  if (begin < end) fetch(begin);

  // All of a thread's query values are loaded before any is split: a loop of load, split, store
  // waited out the memory's latency once per two loads (the compiler unrolled it by two).
  const float4* qg = reinterpret_cast<const float4*>(q + (t * kHeads + h0) * kDim);
  constexpr int kQLoads = kBlockHeads * kDim / 4 / kThreads;
  static_assert(kQLoads * kThreads * 4 == kBlockHeads * kDim, "the query's values split evenly");
  float4 q_values[kQLoads];
#pragma unroll
  for (int k = 0; k < kQLoads; ++k) q_values[k] = qg[tid + k * kThreads];
#pragma unroll
  for (int k = 0; k < kQLoads; ++k) {
    const int i = tid + k * kThreads;
    const float4 v = q_values[k];
    const int at = (i / (kDim / 4)) * kStride + 4 * (i % (kDim / 4));
    uint32_t xy[kParts], zw[kParts];
    SplitPair(v.x, v.y, xy);
    SplitPair(v.z, v.w, zw);
#pragma unroll
    for (int k = 0; k < kParts; ++k) {
      *reinterpret_cast<uint2*>(sm.q[k] + at) = make_uint2(xy[k], zw[k]);
    }
  }

  // Softmax bookkeeping: eight threads a head, four of the tile's rows each; the eight keep the
  // head's running maximum and sum alike.
  const int bk_head = tid >> 3, bk_part = tid & 7;
  float m_run = -INFINITY, l_run = 0.0f;
  // Warp w: heads 16 (w % 2) .. + 15 of the block's. Logits: rows 16 ((w / 2) % 2) .. + 15 of the
  // tile over channels 256 (w / 4) .. + 255. Output: channels 128 (w / 2) .. + 127.
  const int wh = warp & 1, wr = (warp >> 1) & 1, wk = warp >> 2, wx = warp >> 1;
  float o[16][4];
#pragma unroll
  for (int j = 0; j < 16; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;

  for (int64_t tile = begin; tile < end; tile += kTile) {
    CpAsyncWait<0>();
    __syncthreads();  // the tile's rows landed; the previous tile is no longer read
    {
      uint16_t* dst = sm.kv + copy_row * kStride;
      const uint2* src = sm.raw + copy_row * kRawWords;
      const bool live = tile + copy_row < end;  // rows past the split: zeros, weight 0
      const uint2 scales = live ? src[kRawWords - 1] : make_uint2(0, 0);
#pragma unroll
      for (int c = part; c < kChunks; c += 8) {  // values 8c .. 8c + 7
        uint4 out = make_uint4(0, 0, 0, 0);
        if (live && c < kKvNopeValues / 8) {
          const int blk = c / 8;
          const uint2 v = src[c];
          const float s = E8M0(((blk < 4 ? scales.x : scales.y) >> (8 * (blk & 3))) & 0xff);
          out = make_uint4(E4m3PairToBf16(v.x, s), E4m3PairToBf16(v.x >> 16, s),
                           E4m3PairToBf16(v.y, s), E4m3PairToBf16(v.y >> 16, s));
        } else if (live) {  // RoPE values, bf16 as stored
          const int w = kKvNopeValues / 8 + 2 * (c - kKvNopeValues / 8);
          const uint2 a = src[w], b = src[w + 1];
          out = make_uint4(a.x, a.y, b.x, b.y);
        }
        *reinterpret_cast<uint4*>(dst + 8 * c) = out;
      }
    }
    __syncthreads();  // the raw rows are decoded: the next tile's may come
    if (tile + kTile < end) fetch(tile + kTile);
    {  // logits[32 heads][32 rows]: this warp's 16 x 16 over its 256 channels
      const int at = (16 * wh + (lane & 15)) * kStride + 256 * wk + 8 * (lane >> 4);
      const uint8_t* b_row = Bytes(sm.kv + (16 * wr + (lane & 7) + 8 * (lane >> 4)) * kStride +
                                   256 * wk + 8 * ((lane >> 3) & 1));
      float acc[2][4] = {};
#pragma unroll 1
      for (int c0 = 0; c0 < kDim / 2; c0 += 32) {
        float sum[2][4] = {};
#pragma unroll
        for (int k0 = c0; k0 < c0 + 32; k0 += 16) {
          uint32_t b[4];
          LdMatrixX4(b, b_row + 2 * k0);
#pragma unroll
          for (int k = 0; k < kParts; ++k) {
            uint32_t a[4];
            LdMatrixX4(a, Bytes(sm.q[k] + at + k0));
            MmaBf16(sum[0], a[0], a[1], a[2], a[3], b[0], b[1]);
            MmaBf16(sum[1], a[0], a[1], a[2], a[3], b[2], b[3]);
          }
        }
#pragma unroll
        for (int j = 0; j < 2; ++j) {
#pragma unroll
          for (int c = 0; c < 4; ++c) acc[j][c] += sum[j][c];
        }
      }
#pragma unroll
      for (int j = 0; j < 2; ++j) {
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int h = 16 * wh + g + 8 * (c >> 1), r = 16 * wr + 8 * j + 2 * t4 + (c & 1);
          sm.logit[wk][h * kSStride + r] = acc[j][c];
        }
      }
    }
    __syncthreads();
    {  // online softmax: the head's new maximum, its weights in parts, the rescaling
      const int at = bk_head * kSStride + 4 * bk_part;
      float v[4], mx = m_run;
#pragma unroll
      for (int i = 0; i < 4; ++i) {  // the channel halves in a fixed order
        v[i] = tile + 4 * bk_part + i < end ? (sm.logit[0][at + i] + sm.logit[1][at + i]) * scale
                                            : -INFINITY;
        mx = fmaxf(mx, v[i]);
      }
#pragma unroll
      for (int off = 1; off < 8; off <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
      const float alpha = expf(m_run - mx);  // 0 on the first tile (exp(-inf))
      const float p0 = expf(v[0] - mx), p1 = expf(v[1] - mx);
      const float p2 = expf(v[2] - mx), p3 = expf(v[3] - mx);
      uint32_t p01[kParts], p23[kParts];
      SplitPair(p0, p1, p01);
      SplitPair(p2, p3, p23);
#pragma unroll
      for (int k = 0; k < kParts; ++k) {
        *reinterpret_cast<uint2*>(sm.p[k] + bk_head * kPStride + 4 * bk_part) =
            make_uint2(p01[k], p23[k]);
      }
      float sum = (p0 + p1) + (p2 + p3);
#pragma unroll
      for (int off = 1; off < 8; off <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
      l_run = l_run * alpha + sum;
      m_run = mx;
      if (bk_part == 0) sm.alpha[bk_head] = alpha;
    }
    __syncthreads();
    {  // output[32 heads][512] = alpha output + weights[32][32] rows[32][512]: this warp's
       // 16 x 128, each 16 channels summed afresh over the tile
      const float alpha_lo = sm.alpha[16 * wh + g], alpha_hi = sm.alpha[16 * wh + g + 8];
      const int at = (16 * wh + (lane & 15)) * kPStride + 8 * (lane >> 4);
      const uint8_t* v_row = Bytes(sm.kv + (lane & 15) * kStride + 128 * wx + 8 * (lane >> 4));
      uint32_t a[kParts][2][4];
#pragma unroll
      for (int k = 0; k < kParts; ++k) {
        LdMatrixX4(a[k][0], Bytes(sm.p[k] + at));
        LdMatrixX4(a[k][1], Bytes(sm.p[k] + at + 16));
      }
#pragma unroll
      for (int n16 = 0; n16 < 8; ++n16) {
        float sum[2][4] = {};
#pragma unroll
        for (int ks = 0; ks < 2; ++ks) {
          uint32_t b[4];
          LdMatrixX4Trans(b, v_row + 2 * (16 * ks * kStride + 16 * n16));
#pragma unroll
          for (int k = 0; k < kParts; ++k) {
            const uint32_t(&f)[4] = a[k][ks];
            MmaBf16(sum[0], f[0], f[1], f[2], f[3], b[0], b[1]);
            MmaBf16(sum[1], f[0], f[1], f[2], f[3], b[2], b[3]);
          }
        }
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          float* out = o[2 * n16 + j];
          out[0] = fmaf(out[0], alpha_lo, sum[j][0]);
          out[1] = fmaf(out[1], alpha_lo, sum[j][1]);
          out[2] = fmaf(out[2], alpha_hi, sum[j][2]);
          out[3] = fmaf(out[3], alpha_hi, sum[j][3]);
        }
      }
    }
  }

  float* out = partial + ((t * splits + split) * kHeads + h0) * (kDim + 2);
  if (bk_part == 0) {
    out[bk_head * (kDim + 2)] = m_run;
    out[bk_head * (kDim + 2) + 1] = l_run;
  }
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    const int c = 128 * wx + 8 * j + 2 * t4;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float* dst = out + (16 * wh + g + 8 * half) * (kDim + 2) + 2 + c;
      *reinterpret_cast<float2*>(dst) = make_float2(o[j][2 * half], o[j][2 * half + 1]);
    }
  }
}

}  // namespace

int LaunchMqaMmaSplits(const float* q, const uint8_t* rows, const int32_t* row_index,
                       const int64_t* offsets, int64_t n_queries, float scale, int splits,
                       float* partial, void* stream) {
  if (splits < 1 || splits > 65535 || n_queries > 0x7fffffff ||
      (reinterpret_cast<uintptr_t>(q) & 15) != 0 || (reinterpret_cast<uintptr_t>(rows) & 7) != 0 ||
      (reinterpret_cast<uintptr_t>(partial) & 7) != 0) {
    return static_cast<int>(cudaErrorInvalidValue);
  }
  if (n_queries <= 0) return 0;
  constexpr size_t kSmemBytes = sizeof(Smem);
  // Set on every launch, not once: the attribute belongs to the current device's copy of the
  // kernel, and expert parallelism runs a forward on each device.
  if (const cudaError_t e = cudaFuncSetAttribute(
          MqaMmaKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes)) {
    return static_cast<int>(e);
  }
  LaunchKernel(
      MqaMmaKernel,
      dim3(static_cast<unsigned>(n_queries), kMqaMmaHeadBlocks, static_cast<unsigned>(splits)),
      kThreads, kSmemBytes, static_cast<cudaStream_t>(stream), q, rows, row_index, offsets, scale,
      splits, partial);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace deepinfer::kernels
