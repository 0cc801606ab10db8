// Compiled without FMA contraction (kernels/CMakeLists.txt), as ops.cu and forward_glue.cu whose
// RoPE, SwiGLU and FP8 rounding these reproduce. The norm alone is RmsNormFast.
#include <cuda_runtime.h>

#include "kernels/device_math.cuh"
#include "kernels/exact_math.h"
#include "kernels/fused_glue.h"
#include "kernels/launch.cuh"
#include "kernels/rope_qdq.cuh"

namespace deepinfer::kernels {
namespace {

constexpr int kThreads = 256, kWarps = kThreads / 32;

// Block per row: the norm, the rotation of the trailing rope_dim channels (pairs taken by the
// first rope_dim / 2 threads, every other channel by its own thread), then the FP8 round trip
// of the written row with a warp per 128-wide block.
__global__ void __launch_bounds__(kThreads)
    NormRopeQdqKernel(const float* x, const float* weight, int64_t dim, float eps, RopeArgs rope,
                      bool has_rope, float* y, float* y_fp8) {
  AwaitProducers();
  const float* xr = x + blockIdx.x * dim;
  float ss = 0;
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) ss = __fmaf_rn(xr[i], xr[i], ss);
  const float inv = rsqrtf(BlockSum<kThreads>(ss) / static_cast<float>(dim) + eps);
  float* yr = y + blockIdx.x * dim;
  const int64_t rotated_from = has_rope ? dim - rope.rope_dim : dim;
  const auto normed = [&](int64_t i) {
    return __fmul_rn(__fmul_rn(xr[i], inv), weight ? weight[i] : 1.0f);
  };
  if (has_rope && threadIdx.x < rope.rope_dim / 2) {
    const int64_t c = rotated_from + 2 * threadIdx.x;
    float a = normed(c), b = normed(c + 1);
    RotatePair(a, b, rope.positions[blockIdx.x / rope.heads], threadIdx.x, rope);
    yr[c] = a;
    yr[c + 1] = b;
  }
  for (int64_t i = threadIdx.x; i < rotated_from; i += kThreads) yr[i] = normed(i);
  if (y_fp8 == nullptr) return;
  __syncthreads();  // the row's values are in y for every thread of the block
  const int lane = threadIdx.x & 31;
  for (int64_t b0 = (threadIdx.x >> 5) * 128; b0 < dim; b0 += kWarps * 128) {
    const int64_t c0 = b0 + 4 * lane;
    float v[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) v[k] = c0 + k < dim ? yr[c0 + k] : 0.0f;
    StoreQdqBlock(v, c0, dim, y_fp8 + blockIdx.x * dim);
  }
}

__global__ void SwiGluQdqKernel(const float* gate, const float* up, int64_t rows, int64_t width,
                                float limit, float* out, float* out_fp8) {
  AwaitProducers();
  const int lane = threadIdx.x & 31;
  const int64_t blocks_per_row = (width + 127) / 128;
  const int64_t blk = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (blk >= rows * blocks_per_row) return;
  const int64_t row = blk / blocks_per_row, c0 = (blk % blocks_per_row) * 128 + 4 * lane;
  float v[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const int64_t i = row * width + c0 + k;
    v[k] = c0 + k < width ? SwiGluF(gate[i], up[i], limit) : 0.0f;
    if (c0 + k < width) out[i] = v[k];
  }
  StoreQdqBlock(v, c0, width, out_fp8 + row * width);
}

unsigned WarpBlocks(int64_t rows, int64_t dim) {
  return static_cast<unsigned>((rows * ((dim + 127) / 128) + kWarps - 1) / kWarps);
}

bool ValidRope(const RopeArgs& r) {
  return r.heads >= 1 && r.rope_dim >= 0 && r.rope_dim % 2 == 0 && r.rope_dim <= r.head_dim &&
         r.head_dim % 2 == 0 && r.rope_dim / 2 <= kThreads && r.inv_freq && r.positions;
}

}  // namespace

int RmsNormRopeQdq(const float* x, const float* weight, int64_t rows, int64_t dim, float eps,
                   const RopeArgs* rope, float* y, float* y_fp8, void* stream) {
  if (rope && (!ValidRope(*rope) || rope->head_dim != dim || rows % rope->heads != 0)) {
    return static_cast<int>(cudaErrorInvalidValue);
  }
  if (rows == 0) return 0;
  LaunchKernel(NormRopeQdqKernel, static_cast<unsigned>(rows), kThreads, 0,
               static_cast<cudaStream_t>(stream), x, weight, dim, eps, rope ? *rope : RopeArgs{},
               rope != nullptr, y, y_fp8);
  return static_cast<int>(cudaGetLastError());
}

int SwiGluQdq(const float* gate, const float* up, int64_t rows, int64_t width, float limit,
              float* out, float* out_fp8, void* stream) {
  if (out_fp8 == nullptr) return static_cast<int>(cudaErrorInvalidValue);
  if (rows == 0) return 0;
  LaunchKernel(SwiGluQdqKernel, WarpBlocks(rows, width), kThreads, 0,
               static_cast<cudaStream_t>(stream), gate, up, rows, width, limit, out, out_fp8);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace deepinfer::kernels
