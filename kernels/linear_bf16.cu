#include <cuda_runtime.h>

#include "kernels/device_math.cuh"
#include "kernels/launch.cuh"
#include "kernels/linear_bf16.h"
#include "kernels/linear_fp8.h"  // kMaxGemvProducts

namespace deepinfer::kernels {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kMaxRows = 8;

// The products of one launch: blocks [block_end[p - 1], block_end[p]) compute product p with its
// own column split, so each product's sums are those of its own launch.
struct Products {
  const uint16_t* w[kMaxGemvProducts];
  float* y[kMaxGemvProducts];
  int64_t out[kMaxGemvProducts];
  int split[kMaxGemvProducts];
  int block_end[kMaxGemvProducts];
  int n = 0;
  bool early = false;  // one step of weights loaded before the programmatic-launch wait
};

// A warp takes Outs weight rows; each lane loads 16 bytes (8 weights) of each at a time, so a
// warp streams 512 contiguous bytes per row and step, and every activation load from L1 serves
// Outs rows. bf16 -> fp32 is a shift. With split > 1, that many consecutive warps share the rows
// and take interleaved 256-column steps (FinishSplitDots).
template <int Outs, int Rows>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    Bf16GemvKernel(Products prods, int64_t in, const float* __restrict__ x) {
  int p = 0;
  while (p + 1 < prods.n && static_cast<int>(blockIdx.x) >= prods.block_end[p]) ++p;
  const int block = static_cast<int>(blockIdx.x) - (p > 0 ? prods.block_end[p - 1] : 0);
  const uint16_t* w = prods.w[p];
  float* y = prods.y[p];
  const int64_t out = prods.out[p];
  const int split = prods.split[p];
  __shared__ float red[kWarpsPerBlock * Outs * Rows];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t o0 = (static_cast<int64_t>(block) * (kWarpsPerBlock / split) + warp / split) * Outs;
  const bool active = o0 < out;
  const uint4* wr[Outs];
#pragma unroll
  for (int j = 0; j < Outs; ++j) {
    wr[j] = reinterpret_cast<const uint4*>(w + (o0 + j < out ? o0 + j : out - 1) * in);
  }
  // At one activation row a warp's first step of weights is loaded before the wait when the
  // weights are settled (EarlyWeightLoads): it streams while the kernel before this one runs.
  const int64_t c0 = (warp % split) * 32 + lane;
  const bool early = Rows == 1 && prods.early && active && c0 < in / 8;
  uint4 first[Outs];
  if (early) {
#pragma unroll
    for (int j = 0; j < Outs; ++j) first[j] = __ldg(wr[j] + c0);
  }
  AwaitProducers();
  float acc[Outs][Rows];
#pragma unroll
  for (int j = 0; j < Outs; ++j) {
#pragma unroll
    for (int r = 0; r < Rows; ++r) acc[j][r] = 0.0f;
  }
  for (int64_t c = c0; active && c < in / 8; c += split * 32) {
    float wv[Outs][8];
#pragma unroll
    for (int j = 0; j < Outs; ++j) {
      const uint4 packed = early && c == c0 ? first[j] : __ldg(wr[j] + c);
      const uint32_t words[4] = {packed.x, packed.y, packed.z, packed.w};
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        wv[j][2 * k] = __int_as_float(static_cast<int>(words[k] << 16));
        wv[j][2 * k + 1] = __int_as_float(static_cast<int>(words[k] & 0xffff0000u));
      }
    }
#pragma unroll
    for (int r = 0; r < Rows; ++r) {
      const float4* xr = reinterpret_cast<const float4*>(x + r * in + c * 8);
      const float4 a = __ldg(xr), b = __ldg(xr + 1);
#pragma unroll
      for (int j = 0; j < Outs; ++j) {
        acc[j][r] += wv[j][0] * a.x + wv[j][1] * a.y + wv[j][2] * a.z + wv[j][3] * a.w +
                     wv[j][4] * b.x + wv[j][5] * b.y + wv[j][6] * b.z + wv[j][7] * b.w;
      }
    }
  }
  FinishSplitDots(acc, split, active, red, [&](int j, int r, float v) {
    if (o0 + j < out) y[r * out + o0 + j] = v;
  });
}

// Warps in flight that keep the H200's SMs streaming (64 resident per SM).
constexpr int64_t kTargetWarps = 8192;

// As the FP8 GEMV: a short product's columns split over up to 8 warps while fewer than
// kTargetWarps warps would be in flight. The split follows each weight's shape alone, never the
// number of activation rows or the other products of the launch, so a row's sums are the same in
// any batch and any launch; Outs does not change them.
// Weight rows per warp for a weight of `out` rows (or several weights of `out` rows in all): more
// rows per warp while at least ~1,024 warps stay in flight, as the FP8 GEMV.
int OutsFor(int64_t out) { return out / 4 >= 1024 ? 4 : out / 2 >= 1024 ? 2 : 1; }

template <int Outs, int Rows>
void LaunchRows(Products prods, int64_t in, const float* x, cudaStream_t stream) {
  const int64_t steps = (in / 8 + 31) / 32;
  int blocks = 0;
  for (int p = 0; p < prods.n; ++p) {
    // The split the product would have alone.
    const int alone = OutsFor(prods.out[p]);
    const int64_t warps = (prods.out[p] + alone - 1) / alone;
    int split = 1;
    while (split < kWarpsPerBlock && split * 2 <= steps && warps * split < kTargetWarps) split *= 2;
    prods.split[p] = split;
    const int64_t per_block = kWarpsPerBlock / split * Outs;
    blocks += static_cast<int>((prods.out[p] + per_block - 1) / per_block);
    prods.block_end[p] = blocks;
  }
  prods.early = EarlyWeightLoads();
  LaunchKernel(Bf16GemvKernel<Outs, Rows>, static_cast<unsigned>(blocks), kWarpsPerBlock * 32, 0,
               stream, prods, in, x);
}

// Rows as a template argument keeps the accumulators in registers.
template <int Outs>
void Launch(const Products& prods, int64_t in, const float* x, int rows, cudaStream_t stream) {
  switch (rows) {
    case 1:
      return LaunchRows<Outs, 1>(prods, in, x, stream);
    case 2:
      return LaunchRows<Outs, 2>(prods, in, x, stream);
    case 3:
      return LaunchRows<Outs, 3>(prods, in, x, stream);
    case 4:
      return LaunchRows<Outs, 4>(prods, in, x, stream);
    case 5:
      return LaunchRows<Outs, 5>(prods, in, x, stream);
    case 6:
      return LaunchRows<Outs, 6>(prods, in, x, stream);
    case 7:
      return LaunchRows<Outs, 7>(prods, in, x, stream);
    default:
      return LaunchRows<Outs, 8>(prods, in, x, stream);
  }
}

int LaunchProducts(const Products& prods, int64_t in, const float* x, int rows, void* stream) {
  bool ok = rows >= 1 && rows <= kMaxRows && in % 8 == 0 && prods.n >= 1 &&
            prods.n <= kMaxGemvProducts && (reinterpret_cast<uintptr_t>(x) & 15) == 0;
  int64_t out_all = 0;
  for (int p = 0; p < prods.n && ok; ++p) {
    ok = prods.out[p] > 0 && (reinterpret_cast<uintptr_t>(prods.w[p]) & 15) == 0;
    out_all += prods.out[p];
  }
  if (!ok) return static_cast<int>(cudaErrorInvalidValue);
  auto s = static_cast<cudaStream_t>(stream);
  switch (OutsFor(out_all)) {
    case 4:
      Launch<4>(prods, in, x, rows, s);
      break;
    case 2:
      Launch<2>(prods, in, x, rows, s);
      break;
    default:
      Launch<1>(prods, in, x, rows, s);
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int Bf16Gemv(const uint16_t* w, int64_t out, int64_t in, const float* x, int rows, float* y,
             void* stream) {
  Products prods;
  prods.w[0] = w;
  prods.y[0] = y;
  prods.out[0] = out;
  prods.n = 1;
  return LaunchProducts(prods, in, x, rows, stream);
}

int Bf16GemvMulti(const Bf16GemvProduct* products, int n, int64_t in, const float* x, int rows,
                  void* stream) {
  if (n < 1 || n > kMaxGemvProducts) return static_cast<int>(cudaErrorInvalidValue);
  Products prods;
  for (int p = 0; p < n; ++p) {
    prods.w[p] = products[p].w;
    prods.y[p] = products[p].y;
    prods.out[p] = products[p].out;
  }
  prods.n = n;
  return LaunchProducts(prods, in, x, rows, stream);
}

}  // namespace deepinfer::kernels
