#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "kernels/device_math.cuh"
#include "kernels/launch.cuh"
#include "kernels/linear_fp8.h"

namespace deepinfer::kernels {
namespace {

constexpr int kMaxRows = 8;
constexpr int kWarpsPerBlock = 8;

// Element offsets from one group of a grouped product to the next (blockIdx.y is the group).
struct GroupStrides {
  int64_t w = 0, scale = 0, x = 0, y = 0;
  int64_t x_row = 0, y_row = 0;  // row strides of x and y (floats)
};

// One warp per output row; each lane takes 4 consecutive weights (one 32-bit load) per step, so
// a warp reads 128 contiguous bytes — exactly one scale block — per step.
template <int Rows>
__global__ void Fp8GemvKernel(const uint8_t* __restrict__ w, const uint8_t* __restrict__ scale,
                              int64_t out, int64_t in, const float* __restrict__ x,
                              float* __restrict__ y, GroupStrides g) {
  AwaitProducers();
  w += blockIdx.y * g.w;
  scale += blockIdx.y * g.scale;
  x += blockIdx.y * g.x;
  y += blockIdx.y * g.y;
  const int lane = threadIdx.x & 31;
  const int64_t o = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (o >= out) return;
  const int64_t scale_cols = (in + 127) / 128;
  const uint8_t* wr = w + o * in;
  const uint8_t* sr = scale + (o / 128) * scale_cols;
  float acc[Rows];
#pragma unroll
  for (int r = 0; r < Rows; ++r) acc[r] = 0.0f;
  for (int64_t base = 0; base < in; base += 128) {
    const float s = E8M0(sr[base / 128]);
    const int64_t i0 = base + lane * 4;
    float wv[4];
    if (i0 + 4 <= in && (reinterpret_cast<uintptr_t>(wr + i0) & 3) == 0) {
      const uint32_t packed = *reinterpret_cast<const uint32_t*>(wr + i0);
#pragma unroll
      for (int k = 0; k < 4; ++k) wv[k] = E4M3((packed >> (8 * k)) & 0xff) * s;
    } else {
#pragma unroll
      for (int k = 0; k < 4; ++k) wv[k] = i0 + k < in ? E4M3(wr[i0 + k]) * s : 0.0f;
    }
#pragma unroll
    for (int r = 0; r < Rows; ++r) {
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        if (i0 + k < in) acc[r] += wv[k] * x[r * g.x_row + i0 + k];
      }
    }
  }
#pragma unroll
  for (int r = 0; r < Rows; ++r) {
    const float v = WarpSum(acc[r]);
    if (lane == 0) y[r * g.y_row + o] = v;
  }
}

// The products of one wide launch (kMaxGemvProducts at most; one for a plain or grouped GEMV):
// blocks [block_end[p - 1], block_end[p]) compute product p with its own column split, so each
// product's sums are those of its own launch.
struct WideProducts {
  const uint8_t* w[kMaxGemvProducts];
  const uint8_t* scale[kMaxGemvProducts];
  float* y[kMaxGemvProducts];
  int64_t out[kMaxGemvProducts];
  int64_t y_row[kMaxGemvProducts];
  int split[kMaxGemvProducts];
  int block_end[kMaxGemvProducts];
  int n = 0;
  bool early = false;  // weights loaded before the programmatic-launch wait
};

// Steps of weights a warp loads before the wait: two (all of wq_b's 1,024 columns) at one
// activation row; none with several, whose accumulators leave no registers for them.
template <int Rows>
constexpr int kEarlySteps = Rows == 1 ? 2 : 0;

// Fast path for rows whose width is a multiple of 512 and 16-byte aligned: each lane loads 16
// weights at once, so a warp streams 512 bytes (four scale blocks) per step; unrolling keeps two
// such loads in flight. With several activation rows a warp takes Outs weight rows, so every
// activation load from L1 serves Outs weight rows instead of one. With split > 1, that many
// consecutive warps share the rows and take interleaved 512-column steps (FinishSplitDots).
// Multi: several products (a block finds its own); else product 0, a constant index, so the
// single and grouped launches compile as they did before products existed (a runtime index costs
// the 8-row form spilled registers).
template <int Rows, int Outs, bool Multi>
__global__ void Fp8GemvWideKernel(WideProducts prods, int64_t in, const float* __restrict__ x,
                                  GroupStrides g) {
  static_assert(128 % Outs == 0, "a warp's rows must share one scale row");
  int p = 0;
  while (Multi && p + 1 < prods.n && static_cast<int>(blockIdx.x) >= prods.block_end[p]) ++p;
  const int block = static_cast<int>(blockIdx.x) - (p > 0 ? prods.block_end[p - 1] : 0);
  const uint8_t* w = prods.w[p] + blockIdx.y * g.w;
  const uint8_t* scale = prods.scale[p] + blockIdx.y * g.scale;
  float* y = prods.y[p] + blockIdx.y * g.y;
  const int64_t out = prods.out[p], y_row = prods.y_row[p];
  const int split = prods.split[p];
  x += blockIdx.y * g.x;
  __shared__ float red[kWarpsPerBlock * Outs * Rows];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t o0 = (static_cast<int64_t>(block) * (kWarpsPerBlock / split) + warp / split) * Outs;
  const bool active = o0 < out;
  const int64_t scale_cols = in / 128;
  const uint8_t* sr = scale + (o0 / 128) * scale_cols;
  const uint4* wr[Outs];
#pragma unroll
  for (int j = 0; j < Outs; ++j) {
    // Rows past the end re-read the last row; their results are not stored.
    wr[j] = reinterpret_cast<const uint4*>(w + (o0 + j < out ? o0 + j : out - 1) * in);
  }
  const int64_t first = (warp % split) * 512, stride = static_cast<int64_t>(split) * 512;
  // A warp's first steps of weights, loaded before the wait when the weights are settled
  // (EarlyWeightLoads): they stream from HBM while the kernel before this one still runs.
  constexpr int kEarlySlots = (kEarlySteps<Rows>) > 0 ? kEarlySteps<Rows> : 1;
  uint4 early[kEarlySlots][Outs];
  float early_scale[kEarlySlots];
  if (!prods.early) AwaitProducers();
#pragma unroll
  for (int e = 0; e < kEarlySteps<Rows>; ++e) {
    const int64_t i0 = first + e * stride + lane * 16;
    if (active && first + e * stride < in) {
#pragma unroll
      for (int j = 0; j < Outs; ++j) early[e][j] = __ldg(wr[j] + i0 / 16);
      early_scale[e] = E8M0(__ldg(sr + i0 / 128));
    }
  }
  if (prods.early) AwaitProducers();
  float acc[Outs][Rows];
#pragma unroll
  for (int j = 0; j < Outs; ++j) {
#pragma unroll
    for (int r = 0; r < Rows; ++r) acc[j][r] = 0.0f;
  }
  // One 512-column step of every row of the warp, in column order (the same sums whether its
  // weights were loaded early or not).
  const auto accumulate = [&](int64_t i0, const uint4(&packed)[Outs], float s) {
    // Hardware FP8->FP16 conversion is exact for e4m3; the power-of-two block scale is applied
    // once per 16 products, which rounds identically to scaling each weight.
    float wv[Outs][16];
#pragma unroll
    for (int j = 0; j < Outs; ++j) {
      const uint32_t words[4] = {packed[j].x, packed[j].y, packed[j].z, packed[j].w};
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(
            static_cast<__nv_fp8x2_storage_t>((words[k / 2] >> (16 * (k % 2))) & 0xffff),
            __NV_E4M3);
        const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
        wv[j][2 * k] = f.x;
        wv[j][2 * k + 1] = f.y;
      }
    }
#pragma unroll
    for (int r = 0; r < Rows; ++r) {
      const float4* xr = reinterpret_cast<const float4*>(x + r * g.x_row + i0);
      float part[Outs];
#pragma unroll
      for (int j = 0; j < Outs; ++j) part[j] = 0.0f;
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const float4 xv = __ldg(xr + q);
#pragma unroll
        for (int j = 0; j < Outs; ++j) {
          part[j] += wv[j][4 * q] * xv.x + wv[j][4 * q + 1] * xv.y + wv[j][4 * q + 2] * xv.z +
                     wv[j][4 * q + 3] * xv.w;
        }
      }
#pragma unroll
      for (int j = 0; j < Outs; ++j) acc[j][r] += part[j] * s;
    }
  };
#pragma unroll
  for (int e = 0; e < kEarlySteps<Rows>; ++e) {
    const int64_t i0 = first + e * stride + lane * 16;
    if (active && first + e * stride < in) accumulate(i0, early[e], early_scale[e]);
  }
#pragma unroll 2
  for (int64_t base = first + kEarlySteps<Rows> * stride; active && base < in; base += stride) {
    const int64_t i0 = base + lane * 16;
    uint4 packed[Outs];
#pragma unroll
    for (int j = 0; j < Outs; ++j) packed[j] = __ldg(wr[j] + i0 / 16);
    accumulate(i0, packed, E8M0(__ldg(sr + i0 / 128)));
  }
  FinishSplitDots(acc, split, active, red, [&](int j, int r, float v) {
    if (o0 + j < out) y[r * y_row + o0 + j] = v;
  });
}

// Warps a product's column split aims for: a quarter of the H200's resident warps (8,448). The
// short products (wq_a and wkv, the shared expert) then split 2-4 ways instead of 8, so each warp
// keeps more loads of its own in flight, and the wq_a+wkv pair is one wave (1.45 at 8,192).
// Measured in whole decode steps (bench/RESULTS-gpu.md, "Fewer column splits"): 8,192 -> 4,096
// took 2.2 % off batch 1, 4,096 -> 2,048 another 0.4-0.7 %.
constexpr int64_t kTargetWarps = 2048;

// Weight rows per warp for one activation row: more rows per warp amortise the activation loads
// (measured on the H200: 1.5 -> 2.7 TB/s at one row), as long as 2,048 warps remain to keep the
// SMs streaming (bench/RESULTS-gpu.md, "FP8 block-scaled GEMV").
int OutsForOneRow(int64_t rows_all) {
  return rows_all / 4 >= 2048 ? 4 : rows_all / 2 >= 2048 ? 2 : 1;
}

// The warps each dot's columns are split over: up to 8 while the product at one activation row
// has fewer than kTargetWarps warps, since a short product (wq_a, the shared expert, wkv) is
// otherwise latency-bound, each warp with only a few loads in flight. It follows the shape alone,
// never the number of rows, so a row's sums are the same in any batch of up to 8 rows.
int ColumnSplit(int64_t out, int64_t in, int groups) {
  const int64_t rows_all = out * groups, warps = rows_all / OutsForOneRow(rows_all);
  int split = 1;
  while (split < kWarpsPerBlock && split * 2 <= in / 512 && warps * split < kTargetWarps)
    split *= 2;
  return split;
}

template <int Rows, int Outs>
void LaunchWide(WideProducts prods, int64_t in, const float* x, int groups, GroupStrides g,
                cudaStream_t stream) {
  int blocks = 0;
  prods.early = EarlyWeightLoads();
  for (int p = 0; p < prods.n; ++p) {
    prods.split[p] = ColumnSplit(prods.out[p], in, groups);
    const int64_t per_block = kWarpsPerBlock / prods.split[p] * Outs;
    blocks += static_cast<int>((prods.out[p] + per_block - 1) / per_block);
    prods.block_end[p] = blocks;
  }
  if (prods.n > 1) {
    LaunchKernel(Fp8GemvWideKernel<Rows, Outs, true>, dim3(static_cast<unsigned>(blocks), groups),
                 32 * kWarpsPerBlock, 0, stream, prods, in, x, g);
  } else {
    LaunchKernel(Fp8GemvWideKernel<Rows, Outs, false>, dim3(static_cast<unsigned>(blocks), groups),
                 32 * kWarpsPerBlock, 0, stream, prods, in, x, g);
  }
}

// Whether every product can take the wide kernel (the narrow one serves one product a launch).
bool Wide(const WideProducts& prods, int64_t in, const float* x, const GroupStrides& g) {
  bool wide = in % 512 == 0 && g.x % 4 == 0 && g.x_row % 4 == 0 &&
              (reinterpret_cast<uintptr_t>(x) & 15) == 0;
  for (int p = 0; p < prods.n; ++p)
    wide = wide && (reinterpret_cast<uintptr_t>(prods.w[p]) & 15) == 0;
  return wide;
}

template <int Rows>
int Launch(const WideProducts& prods, int64_t in, const float* x, int groups, GroupStrides g,
           cudaStream_t stream) {
  if (Wide(prods, in, x, g)) {
    // As OutsForOneRow; with several activation rows 1,024 warps suffice. A warp's rows never
    // change a row's sums, so the products of one launch share the choice.
    int64_t rows_all = 0;
    for (int p = 0; p < prods.n; ++p) rows_all += prods.out[p] * groups;
    const int64_t min_warps = Rows == 1 ? 2048 : 1024;
    if (Rows > 1 && rows_all / 8 >= min_warps) {
      LaunchWide<Rows, 8>(prods, in, x, groups, g, stream);
    } else if (rows_all / 4 >= min_warps) {
      LaunchWide<Rows, 4>(prods, in, x, groups, g, stream);
    } else if (rows_all / 2 >= min_warps) {
      LaunchWide<Rows, 2>(prods, in, x, groups, g, stream);
    } else {
      LaunchWide<Rows, 1>(prods, in, x, groups, g, stream);
    }
  } else if (prods.n > 1) {  // each product as its own launch would take it (wide or narrow)
    for (int p = 0; p < prods.n; ++p) {
      WideProducts one;
      one.w[0] = prods.w[p];
      one.scale[0] = prods.scale[p];
      one.y[0] = prods.y[p];
      one.out[0] = prods.out[p];
      one.y_row[0] = prods.y_row[p];
      one.n = 1;
      Launch<Rows>(one, in, x, groups, g, stream);
    }
  } else {
    GroupStrides gp = g;
    gp.y_row = prods.y_row[0];
    const int64_t blocks = (prods.out[0] + kWarpsPerBlock - 1) / kWarpsPerBlock;
    LaunchKernel(Fp8GemvKernel<Rows>, dim3(static_cast<unsigned>(blocks), groups),
                 32 * kWarpsPerBlock, 0, stream, prods.w[0], prods.scale[0], prods.out[0], in, x,
                 prods.y[0], gp);
  }
  return static_cast<int>(cudaGetLastError());
}

int LaunchRows(const WideProducts& prods, int64_t in, const float* x, int rows, int groups,
               const GroupStrides& g, cudaStream_t s) {
  switch (rows) {
    case 1:
      return Launch<1>(prods, in, x, groups, g, s);
    case 2:
      return Launch<2>(prods, in, x, groups, g, s);
    case 3:
      return Launch<3>(prods, in, x, groups, g, s);
    case 4:
      return Launch<4>(prods, in, x, groups, g, s);
    case 5:
      return Launch<5>(prods, in, x, groups, g, s);
    case 6:
      return Launch<6>(prods, in, x, groups, g, s);
    case 7:
      return Launch<7>(prods, in, x, groups, g, s);
    case 8:
      return Launch<kMaxRows>(prods, in, x, groups, g, s);
    default:
      return static_cast<int>(cudaErrorInvalidValue);
  }
}

}  // namespace

int Fp8BlockGemvGrouped(const uint8_t* w, const uint8_t* scale, int groups, int64_t out, int64_t in,
                        const float* x, int64_t x_group_stride, int64_t x_row_stride, int rows,
                        float* y, int64_t y_group_stride, int64_t y_row_stride, void* stream) {
  if (groups < 1 || (groups > 1 && out % 128 != 0)) return static_cast<int>(cudaErrorInvalidValue);
  const GroupStrides g{out * in,       (out / 128) * ((in + 127) / 128),
                       x_group_stride, y_group_stride,
                       x_row_stride,   y_row_stride};
  WideProducts prods;
  prods.w[0] = w;
  prods.scale[0] = scale;
  prods.y[0] = y;
  prods.out[0] = out;
  prods.y_row[0] = y_row_stride;
  prods.n = 1;
  return LaunchRows(prods, in, x, rows, groups, g, static_cast<cudaStream_t>(stream));
}

int Fp8BlockGemv(const uint8_t* w, const uint8_t* scale, int64_t out, int64_t in, const float* x,
                 int rows, float* y, void* stream) {
  return Fp8BlockGemvGrouped(w, scale, 1, out, in, x, 0, in, rows, y, 0, out, stream);
}

int Fp8BlockGemvMulti(const Fp8GemvProduct* products, int n, int64_t in, const float* x, int rows,
                      void* stream) {
  if (n < 1 || n > kMaxGemvProducts) return static_cast<int>(cudaErrorInvalidValue);
  WideProducts prods;
  for (int p = 0; p < n; ++p) {
    if (products[p].out < 1) return static_cast<int>(cudaErrorInvalidValue);
    prods.w[p] = products[p].w;
    prods.scale[p] = products[p].scale;
    prods.y[p] = products[p].y;
    prods.out[p] = products[p].out;
    prods.y_row[p] = products[p].out;
  }
  prods.n = n;
  const GroupStrides g{0, 0, 0, 0, in, 0};
  return LaunchRows(prods, in, x, rows, 1, g, static_cast<cudaStream_t>(stream));
}

}  // namespace deepinfer::kernels
