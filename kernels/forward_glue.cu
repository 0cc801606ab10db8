// Compiled without FMA contraction (kernels/CMakeLists.txt): every rounding below is the CPU's.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/device_math.cuh"
#include "kernels/forward_glue.h"
#include "kernels/launch.cuh"
#include "kernels/rope_qdq.cuh"

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

// One warp per row of dim = 32 kPer values, lane l holding values kPer l .. kPer l + kPer - 1 in
// registers: the butterflies of strides below kPer within a lane, the others between lanes l and
// l ^ (stride / kPer) by shuffles. Each stage takes a + b and a - b of the same pairs the CPU's
// stage takes, so every value is the CPU's. With rope.rope_dim > 0 the row is first rotated as
// RopeKernel rotates a head (row r at positions[r / rope.heads]). x and out_f32 may alias (in
// place): a lane reads its values before any is written.
template <int kPer>
__global__ void HadamardFp4Kernel(const float* x, int64_t rows, const int32_t* __restrict__ dest,
                                  float* out_f32, uint16_t* __restrict__ out_bf16, RopeArgs rope) {
  AwaitProducers();
  constexpr int kDim = 32 * kPer;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  if (r >= rows) return;
  const int64_t to = dest != nullptr ? dest[r] : r;
  if (to < 0) return;
  float v[kPer];
#pragma unroll
  for (int k = 0; k < kPer; ++k) v[k] = x[r * kDim + kPer * lane + k];
  if (rope.rope_dim > 0) {
    const int first = kDim - rope.rope_dim;
    const int64_t position = rope.positions[r / rope.heads];
    if constexpr (kPer == 1) {  // a pair spans lanes 2m and 2m + 1
      const float other = __shfl_xor_sync(0xffffffffu, v[0], 1);
      if (lane >= first) {
        float c, s;
        RopeCosSin(position, (lane - first) / 2, rope, &c, &s);
        float a = lane % 2 == 0 ? v[0] : other, b = lane % 2 == 0 ? other : v[0];
        RotateBy(a, b, c, s);
        v[0] = lane % 2 == 0 ? a : b;
      }
    } else {
#pragma unroll
      for (int k = 0; k < kPer; k += 2) {
        const int i = kPer * lane + k;
        if (i >= first) RotatePair(v[k], v[k + 1], position, (i - first) / 2, rope);
      }
    }
  }
#pragma unroll
  for (int len = 1; len < kDim; len <<= 1) {  // the CPU's butterflies, stage by stage
    if (len < kPer) {
#pragma unroll
      for (int k = 0; k < kPer; ++k) {
        if ((k & len) != 0) continue;
        const float a = v[k], b = v[k + len];
        v[k] = a + b;
        v[k + len] = a - b;
      }
    } else {
      const int mask = len / kPer;
      const bool upper = (lane & mask) != 0;
#pragma unroll
      for (int k = 0; k < kPer; ++k) {
        const float other = __shfl_xor_sync(0xffffffffu, v[k], mask);
        v[k] = upper ? other - v[k] : v[k] + other;
      }
    }
  }
  const float s = 1.0f / sqrtf(static_cast<float>(kDim));
  const float floor = 6.0f * 0x1p-126f;
  float h[kPer];
  float amax = 0.0f;
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    h[k] = v[k] * s;
    amax = fmaxf(amax, fabsf(h[k]));
  }
  // A 32-value block is 32 / kPer neighbouring lanes.
#pragma unroll
  for (int off = 1; off < 32 / kPer; off <<= 1) {
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
  }
  const int e = Pow2ScaleExponent(amax, 6.0f, floor);
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const float q0 = ldexpf(h[k], -e);
    const float q = q0 < -6.0f ? -6.0f : (6.0f < q0 ? 6.0f : q0);
    const float out = ldexpf(RoundE2M1(q), e);
    const int64_t at = to * kDim + kPer * lane + k;
    if (out_f32 != nullptr) out_f32[at] = out;
    if (out_bf16 != nullptr) out_bf16[at] = __bfloat16_as_ushort(__float2bfloat16_rn(out));
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
                    uint16_t* out_bf16, void* stream, const RopeArgs* rope) {
  if (rows < 0 || (dim != 32 && dim != 64 && dim != 128)) return cudaErrorInvalidValue;
  if (rope != nullptr &&
      (rope->heads < 1 || rope->head_dim != dim || rope->rope_dim < 2 || rope->rope_dim > dim ||
       rope->rope_dim % 2 != 0 || rows % rope->heads != 0)) {
    return cudaErrorInvalidValue;
  }
  if (rows == 0) return 0;
  const RopeArgs r = rope != nullptr ? *rope : RopeArgs{};
  const auto launch = [&](auto kernel) {
    LaunchKernel(kernel, Blocks(rows, kWarps), kThreads, 0, S(stream), x, rows, dest, out_f32,
                 out_bf16, r);
    return static_cast<int>(cudaGetLastError());
  };
  return dim == 32   ? launch(HadamardFp4Kernel<1>)
         : dim == 64 ? launch(HadamardFp4Kernel<2>)
                     : launch(HadamardFp4Kernel<4>);
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
