#include <cuda_runtime.h>

#include "kernels/device_math.cuh"
#include "kernels/launch.cuh"
#include "kernels/linear_bf16.h"

namespace deepinfer::kernels {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kMaxRows = 8;

// A warp takes Outs weight rows; each lane loads 16 bytes (8 weights) of each at a time, so a
// warp streams 512 contiguous bytes per row and step, and every activation load from L1 serves
// Outs rows. bf16 -> fp32 is a shift. With split > 1, that many consecutive warps share the rows
// and take interleaved 256-column steps (FinishSplitDots).
template <int Outs, int Rows>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    Bf16GemvKernel(const uint16_t* __restrict__ w, int64_t out, int64_t in,
                   const float* __restrict__ x, float* __restrict__ y, int split) {
  AwaitProducers();
  __shared__ float red[kWarpsPerBlock * Outs * Rows];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t o0 =
      (static_cast<int64_t>(blockIdx.x) * (kWarpsPerBlock / split) + warp / split) * Outs;
  const bool active = o0 < out;
  const uint4* wr[Outs];
#pragma unroll
  for (int j = 0; j < Outs; ++j) {
    wr[j] = reinterpret_cast<const uint4*>(w + (o0 + j < out ? o0 + j : out - 1) * in);
  }
  float acc[Outs][Rows];
#pragma unroll
  for (int j = 0; j < Outs; ++j) {
#pragma unroll
    for (int r = 0; r < Rows; ++r) acc[j][r] = 0.0f;
  }
  for (int64_t c = (warp % split) * 32 + lane; active && c < in / 8; c += split * 32) {
    float wv[Outs][8];
#pragma unroll
    for (int j = 0; j < Outs; ++j) {
      const uint4 p = __ldg(wr[j] + c);
      const uint32_t words[4] = {p.x, p.y, p.z, p.w};
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
// kTargetWarps warps would be in flight. Outs and the split follow the weight's shape alone,
// never the number of activation rows, so a row's sums are the same in any batch.
template <int Outs, int Rows>
void LaunchRows(const uint16_t* w, int64_t out, int64_t in, const float* x, float* y,
                cudaStream_t stream) {
  const int64_t warps = (out + Outs - 1) / Outs, steps = (in / 8 + 31) / 32;
  int split = 1;
  while (split < kWarpsPerBlock && split * 2 <= steps && warps * split < kTargetWarps) split *= 2;
  const int64_t per_block = kWarpsPerBlock / split * Outs;
  LaunchKernel(Bf16GemvKernel<Outs, Rows>, static_cast<unsigned>((out + per_block - 1) / per_block),
               kWarpsPerBlock * 32, 0, stream, w, out, in, x, y, split);
}

// Rows as a template argument keeps the accumulators in registers.
template <int Outs>
void Launch(const uint16_t* w, int64_t out, int64_t in, const float* x, int rows, float* y,
            cudaStream_t stream) {
  switch (rows) {
    case 1:
      return LaunchRows<Outs, 1>(w, out, in, x, y, stream);
    case 2:
      return LaunchRows<Outs, 2>(w, out, in, x, y, stream);
    case 3:
      return LaunchRows<Outs, 3>(w, out, in, x, y, stream);
    case 4:
      return LaunchRows<Outs, 4>(w, out, in, x, y, stream);
    case 5:
      return LaunchRows<Outs, 5>(w, out, in, x, y, stream);
    case 6:
      return LaunchRows<Outs, 6>(w, out, in, x, y, stream);
    case 7:
      return LaunchRows<Outs, 7>(w, out, in, x, y, stream);
    default:
      return LaunchRows<Outs, 8>(w, out, in, x, y, stream);
  }
}

}  // namespace

int Bf16Gemv(const uint16_t* w, int64_t out, int64_t in, const float* x, int rows, float* y,
             void* stream) {
  if (rows < 1 || rows > kMaxRows || in % 8 != 0 || out <= 0 ||
      (reinterpret_cast<uintptr_t>(w) & 15) != 0 || (reinterpret_cast<uintptr_t>(x) & 15) != 0) {
    return static_cast<int>(cudaErrorInvalidValue);
  }
  auto s = static_cast<cudaStream_t>(stream);
  // As the FP8 GEMV: more rows per warp while at least ~1,024 warps stay in flight.
  if (out / 4 >= 1024) {
    Launch<4>(w, out, in, x, rows, y, s);
  } else if (out / 2 >= 1024) {
    Launch<2>(w, out, in, x, rows, y, s);
  } else {
    Launch<1>(w, out, in, x, rows, y, s);
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace deepinfer::kernels
