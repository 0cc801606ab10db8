// The FP8 GEMM's elementwise companions: activation quantisation to e4m3 in 1x128 blocks (the CPU
// reference's QdqFp8Blocks, bit for bit) and the e8m0 -> fp32 scale conversions. Layouts: see
// kernels/gemm_fp8.h.
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/device_math.cuh"
#include "kernels/gemm_fp8.h"
#include "kernels/launch.cuh"

namespace deepinfer::kernels {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kThreads = 256;

__global__ void E8m0ToF32Kernel(const uint8_t* __restrict__ src, int64_t n,
                                float* __restrict__ dst) {
  AwaitProducers();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    dst[i] = E8M0(src[i]);
  }
}

// dst[p, l] for l < ld: the e8m0 grid [rows, cols] with each row padded to ld entries of 0.
__global__ void WeightScaleKernel(const uint8_t* __restrict__ src, int64_t rows, int64_t cols,
                                  int64_t ld, float* __restrict__ dst) {
  AwaitProducers();
  const int64_t total = rows * ld;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += stride) {
    const int64_t p = i / ld, l = i % ld;
    dst[i] = l < cols ? E8M0(src[p * cols + l]) : 0.0f;
  }
}

// One warp per (row, 128-block); lane l owns values 4l .. 4l+3 of the block. `in` % 16 == 0, so a
// lane's four values are either all inside the row or all past its end.
__global__ void QuantizeActKernel(const float* __restrict__ x, int64_t rows, int64_t padded_rows,
                                  int64_t in, int64_t blocks, bool vector_loads,
                                  uint8_t* __restrict__ xq, float* __restrict__ x_scale) {
  AwaitProducers();
  const int lane = threadIdx.x & 31;
  const int64_t task = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (task >= padded_rows * blocks) return;
  const int64_t r = task / blocks, b = task % blocks;
  const int64_t i0 = b * 128 + lane * 4;
  const bool inside = i0 < in;
  uint32_t* dst = reinterpret_cast<uint32_t*>(xq + r * in + i0);
  if (r >= rows) {  // padding row: zero data, neutral scale
    if (inside) *dst = 0;
    if (lane == 0) x_scale[b * padded_rows + r] = 1.0f;
    return;
  }
  float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  if (inside) {
    const float* src = x + r * in + i0;
    if (vector_loads) {
      const float4 f = __ldg(reinterpret_cast<const float4*>(src));
      v[0] = f.x;
      v[1] = f.y;
      v[2] = f.z;
      v[3] = f.w;
    } else {
#pragma unroll
      for (int k = 0; k < 4; ++k) v[k] = __ldg(src + k);
    }
  }
  // amax = std::max(amax, |x|) in quant.cc skips NaN (the comparison is false); fmaxf does too.
  float amax = 0.0f;
#pragma unroll
  for (int k = 0; k < 4; ++k) amax = fmaxf(amax, fabsf(v[k]));
#pragma unroll
  for (int off = 16; off > 0; off >>= 1)
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
  const int e = E4M3ScaleExponent(amax, kActAmaxFloor);
  uint32_t packed = 0;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const float s = ldexpf(v[k], -e);                                   // exact, as std::ldexp
    const float q = s < -448.0f ? -448.0f : (448.0f < s ? 448.0f : s);  // std::clamp
    packed |= ToE4M3(q) << (8 * k);
  }
  if (inside) *dst = packed;
  if (lane == 0) x_scale[b * padded_rows + r] = ldexpf(1.0f, e);
}

unsigned GridFor(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65536 ? (blocks > 0 ? blocks : 1) : 65536);
}

}  // namespace

int E8m0ToF32(const uint8_t* e8m0, int64_t n, float* dst, void* stream) {
  if (n < 0 || (n > 0 && (e8m0 == nullptr || dst == nullptr))) return kFp8GemmBadArgument;
  if (n == 0) return 0;
  LaunchKernel(E8m0ToF32Kernel, GridFor(n), kThreads, 0, static_cast<cudaStream_t>(stream), e8m0, n,
               dst);
  return static_cast<int>(cudaGetLastError());
}

int Fp8WeightScalesToF32(const uint8_t* e8m0, int64_t out, int64_t in, float* w_scale,
                         void* stream) {
  if (out <= 0 || in <= 0 || e8m0 == nullptr || w_scale == nullptr) return kFp8GemmBadArgument;
  const int64_t rows = Fp8Blocks128(out), cols = Fp8Blocks128(in), ld = Fp8WeightScaleLd(in);
  LaunchKernel(WeightScaleKernel, GridFor(rows * ld), kThreads, 0,
               static_cast<cudaStream_t>(stream), e8m0, rows, cols, ld, w_scale);
  return static_cast<int>(cudaGetLastError());
}

int QuantizeActFp8(const float* x, int64_t rows, int64_t in, uint8_t* xq, float* x_scale,
                   void* stream) {
  if (rows <= 0 || in <= 0 || in % 16 != 0 || x == nullptr || xq == nullptr || x_scale == nullptr ||
      (reinterpret_cast<uintptr_t>(xq) & 15) != 0) {
    return kFp8GemmBadArgument;
  }
  const int64_t padded = Fp8GemmPaddedRows(rows), blocks = Fp8Blocks128(in);
  const int64_t tasks = padded * blocks;
  const int64_t grid = (tasks + kWarpsPerBlock - 1) / kWarpsPerBlock;
  if (grid > 0x7fffffff) return kFp8GemmBadArgument;
  const bool vector_loads = (reinterpret_cast<uintptr_t>(x) & 15) == 0;
  LaunchKernel(QuantizeActKernel, static_cast<unsigned>(grid), kThreads, 0,
               static_cast<cudaStream_t>(stream), x, rows, padded, in, blocks, vector_loads, xq,
               x_scale);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace deepinfer::kernels
