// Compiled without FMA contraction (kernels/CMakeLists.txt): every rounding below is the CPU's.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/device_math.cuh"
#include "kernels/forward_glue.h"
#include "kernels/launch.cuh"

namespace deepinfer::kernels {
namespace {

constexpr int kThreads = 256, kWarps = kThreads / 32;

unsigned Blocks(int64_t n, int per_block) {
  return static_cast<unsigned>((n + per_block - 1) / per_block);
}

__global__ void EmbedKernel(const uint16_t* __restrict__ table, const int32_t* __restrict__ tokens,
                            int64_t n, int64_t dim, int copies, float* __restrict__ out) {
  AwaitProducers();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * dim) return;
  const int64_t t = i / dim, c = i % dim;
  const float v = __bfloat162float(__ushort_as_bfloat16(table[tokens[t] * dim + c]));
  for (int k = 0; k < copies; ++k) out[(t * copies + k) * dim + c] = v;
}

__global__ void GatherKernel(const float* __restrict__ x, int64_t width,
                             const int32_t* __restrict__ rows, int64_t n, float* __restrict__ y) {
  AwaitProducers();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * width) return;
  y[i] = x[rows[i / width] * width + i % width];
}

// One warp per 128-value block: lane l holds values 4l .. 4l + 3 of it.
__global__ void QdqFp8Kernel(const float* x, int64_t rows, int64_t dim, float* y) {
  AwaitProducers();
  const int lane = threadIdx.x & 31;
  const int64_t blocks_per_row = (dim + 127) / 128;
  const int64_t blk = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (blk >= rows * blocks_per_row) return;
  const int64_t row = blk / blocks_per_row, c0 = (blk % blocks_per_row) * 128 + 4 * lane;
  float v[4];
  float amax = 0.0f;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    v[k] = c0 + k < dim ? x[row * dim + c0 + k] : 0.0f;
    amax = fmaxf(amax, fabsf(v[k]));
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1)
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
  const int e = E4M3ScaleExponent(amax, kActAmaxFloor);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    if (c0 + k < dim) y[row * dim + c0 + k] = QdqE4M3(v[k], e);
  }
}

// quant.cc's F32ToE2M1 then E2M1ToF32 for |a| <= 6: the nearest grid value, ties to the even
// code, the sign kept (a negative value rounding to zero gives -0).
__device__ float RoundE2M1(float q) {
  const float a = fminf(fabsf(q), 6.0f);
  int best = 0;
#pragma unroll
  for (int i = 1; i < 8; ++i) {
    const float d_best = fabsf(a - E2M1Magnitude(best)), d = fabsf(a - E2M1Magnitude(i));
    if (d < d_best || (d == d_best && (i % 2 == 0) && (best % 2 == 1))) best = i;
  }
  return signbit(q) ? -E2M1Magnitude(best) : E2M1Magnitude(best);
}

// One warp per row of dim <= 128 values, in shared memory for the butterflies.
// x and out_f32 may alias (in place): a row is read whole before any of it is written.
__global__ void HadamardFp4Kernel(const float* x, int64_t rows, int dim,
                                  const int32_t* __restrict__ dest, float* out_f32,
                                  uint16_t* __restrict__ out_bf16) {
  AwaitProducers();
  __shared__ float buf[kWarps][128];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  if (r >= rows) return;
  const int64_t to = dest != nullptr ? dest[r] : r;
  if (to < 0) return;
  float* v = buf[warp];
  for (int i = lane; i < dim; i += 32) v[i] = x[r * dim + i];
  __syncwarp();
  for (int len = 1; len < dim; len <<= 1) {  // the CPU's butterflies, stage by stage
    for (int k = lane; k < dim / 2; k += 32) {
      const int j = (k / len) * 2 * len + k % len;
      const float a = v[j], b = v[j + len];
      v[j] = a + b;
      v[j + len] = a - b;
    }
    __syncwarp();
  }
  const float s = 1.0f / sqrtf(static_cast<float>(dim));
  const float floor = 6.0f * 0x1p-126f;
  // Block b of 32 values is lane l's value 32 b + l: a warp-wide max per block.
  for (int b = 0; b < dim / 32; ++b) {
    const float h = v[32 * b + lane] * s;
    float amax = fabsf(h);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
      amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
    const int e = Pow2ScaleExponent(amax, 6.0f, floor);
    const float q0 = ldexpf(h, -e);
    const float q = q0 < -6.0f ? -6.0f : (6.0f < q0 ? 6.0f : q0);
    const float out = ldexpf(RoundE2M1(q), e);
    if (out_f32 != nullptr) out_f32[to * dim + 32 * b + lane] = out;
    if (out_bf16 != nullptr)
      out_bf16[to * dim + 32 * b + lane] = __bfloat16_as_ushort(__float2bfloat16_rn(out));
  }
}

__global__ void SetKernel(float* x, int64_t n, float value) {
  AwaitProducers();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] = value;
}

__global__ void ScaleKernel(float* x, int64_t n, float factor) {
  AwaitProducers();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= factor;
}

cudaStream_t S(void* stream) { return static_cast<cudaStream_t>(stream); }

}  // namespace

int EmbedRows(const uint16_t* table, const int32_t* tokens, int64_t n, int64_t dim, int copies,
              float* out, void* stream) {
  if (n < 0 || dim < 1 || copies < 1) return cudaErrorInvalidValue;
  if (n == 0) return 0;
  LaunchKernel(EmbedKernel, Blocks(n * dim, kThreads), kThreads, 0, S(stream), table, tokens, n,
               dim, copies, out);
  return cudaGetLastError();
}

int QdqFp8Rows(const float* x, int64_t rows, int64_t dim, float* y, void* stream) {
  if (rows < 0 || dim < 1) return cudaErrorInvalidValue;
  if (rows == 0) return 0;
  LaunchKernel(QdqFp8Kernel, Blocks(rows * ((dim + 127) / 128), kWarps), kThreads, 0, S(stream), x,
               rows, dim, y);
  return cudaGetLastError();
}

int HadamardFp4Rows(const float* x, int64_t rows, int dim, const int32_t* dest, float* out_f32,
                    uint16_t* out_bf16, void* stream) {
  if (rows < 0 || dim < 32 || dim > 128 || (dim & (dim - 1)) != 0) return cudaErrorInvalidValue;
  if (rows == 0) return 0;
  LaunchKernel(HadamardFp4Kernel, Blocks(rows, kWarps), kThreads, 0, S(stream), x, rows, dim, dest,
               out_f32, out_bf16);
  return cudaGetLastError();
}

int GatherRows(const float* x, int64_t width, const int32_t* rows, int64_t n, float* y,
               void* stream) {
  if (n < 0 || width < 1) return cudaErrorInvalidValue;
  if (n == 0) return 0;
  LaunchKernel(GatherKernel, Blocks(n * width, kThreads), kThreads, 0, S(stream), x, width, rows, n,
               y);
  return cudaGetLastError();
}

int SetFloats(float* x, int64_t n, float value, void* stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return 0;
  LaunchKernel(SetKernel, Blocks(n, kThreads), kThreads, 0, S(stream), x, n, value);
  return cudaGetLastError();
}

int ScaleFloats(float* x, int64_t n, float factor, void* stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return 0;
  LaunchKernel(ScaleKernel, Blocks(n, kThreads), kThreads, 0, S(stream), x, n, factor);
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
