// Compiled without FMA contraction (kernels/CMakeLists.txt), as ops.cu and forward_glue.cu whose
// RoPE, SwiGLU and FP8 rounding these reproduce. The norm alone is RmsNormFast.
#include <cuda_runtime.h>

#include "kernels/device_math.cuh"
#include "kernels/exact_math.h"
#include "kernels/fused_glue.h"
#include "kernels/kv_row.cuh"
#include "kernels/launch.cuh"
#include "kernels/rope_qdq.cuh"

namespace deepinfer::kernels {
namespace {

constexpr int kThreads = 256, kWarps = kThreads / 32;

// One norm job as the kernels take it (NormJob with the RoPE arguments by value).
struct DeviceNormJob {
  const float* x;
  const float* weight;
  int64_t rows, dim;
  float eps;
  RopeArgs rope;
  bool has_rope;
  float* y;
  float* y_fp8;
  uint8_t* kv_packed;
  const int32_t* kv_dest;
};

constexpr int kHeld = 4;  // values a thread keeps in registers: rows of up to 1,024 values

// One block for row `row` of the job: the norm, the rotation of the trailing rope_dim channels
// (pairs taken by the first rope_dim / 2 threads, every other channel by its own thread), then
// the FP8 round trip of the written row with a warp per 128-wide block, or the row packed into
// the cache by warp 0. For rows of up to kHeld * kThreads values a thread loads its weights
// before the programmatic-launch wait (`early`), its values once, and its pair's angle before
// the sum's barriers, so that the row's chain holds one load after the wait; the same roundings.
__device__ __forceinline__ void NormRopeQdqRow(const DeviceNormJob& j, int64_t row, bool early) {
  const int64_t dim = j.dim;
  const bool held = dim <= kHeld * kThreads;
  const int64_t rotated_from = j.has_rope ? dim - j.rope.rope_dim : dim;
  const bool rotates = j.has_rope && threadIdx.x < j.rope.rope_dim / 2;
  const int64_t c = rotated_from + 2 * threadIdx.x;  // the rotated pair's first channel
  float wv[kHeld], wa = 1.0f, wb = 1.0f;
  const auto load_weights = [&] {
#pragma unroll
    for (int k = 0; k < kHeld; ++k) {
      const int64_t i = threadIdx.x + k * kThreads;
      wv[k] = held && j.weight && i < dim ? j.weight[i] : 1.0f;
    }
    if (rotates && j.weight) {
      wa = j.weight[c];
      wb = j.weight[c + 1];
    }
  };
  if (early) load_weights();
  AwaitProducers();
  if (!early) load_weights();
  const float* xr = j.x + row * dim;
  float xv[kHeld], xa = 0.0f, xb = 0.0f, ss = 0.0f;
  if (held) {
#pragma unroll
    for (int k = 0; k < kHeld; ++k) {
      const int64_t i = threadIdx.x + k * kThreads;
      xv[k] = i < dim ? xr[i] : 0.0f;
    }
  }
  if (rotates) {
    xa = xr[c];
    xb = xr[c + 1];
  }
  if (held) {
#pragma unroll
    for (int k = 0; k < kHeld; ++k) {
      if (threadIdx.x + k * kThreads < dim) ss = __fmaf_rn(xv[k], xv[k], ss);
    }
  } else {
    for (int64_t i = threadIdx.x; i < dim; i += kThreads) ss = __fmaf_rn(xr[i], xr[i], ss);
  }
  float rope_c = 1.0f, rope_s = 0.0f;
  if (rotates)
    RopeCosSin(j.rope.positions[row / j.rope.heads], threadIdx.x, j.rope, &rope_c, &rope_s);
  const float inv = rsqrtf(BlockSum<kThreads>(ss) / static_cast<float>(dim) + j.eps);
  float* yr = j.y + row * dim;
  if (rotates) {
    float a = __fmul_rn(__fmul_rn(xa, inv), wa), b = __fmul_rn(__fmul_rn(xb, inv), wb);
    RotateBy(a, b, rope_c, rope_s);
    yr[c] = a;
    yr[c + 1] = b;
  }
  if (held) {
#pragma unroll
    for (int k = 0; k < kHeld; ++k) {
      const int64_t i = threadIdx.x + k * kThreads;
      if (i < rotated_from) yr[i] = __fmul_rn(__fmul_rn(xv[k], inv), wv[k]);
    }
  } else {
    for (int64_t i = threadIdx.x; i < rotated_from; i += kThreads) {
      yr[i] = __fmul_rn(__fmul_rn(xr[i], inv), j.weight ? j.weight[i] : 1.0f);
    }
  }
  if (j.y_fp8 == nullptr && j.kv_packed == nullptr) return;
  __syncthreads();  // the row's values are in y for every thread of the block
  const int lane = threadIdx.x & 31;
  if (j.kv_packed != nullptr) {
    const int64_t to = j.kv_dest != nullptr ? j.kv_dest[row] : row;
    if (threadIdx.x >= 32 || to < 0) return;
    PackKvRowWarp(yr, j.kv_packed + to * kKvRowBytes, lane);  // plain loads: this block's row
    return;
  }
  for (int64_t b0 = (threadIdx.x >> 5) * 128; b0 < dim; b0 += kWarps * 128) {
    const int64_t c0 = b0 + 4 * lane;
    float v[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) v[k] = c0 + k < dim ? yr[c0 + k] : 0.0f;
    StoreQdqBlock(v, c0, dim, j.y_fp8 + row * dim);
  }
}

// Block per row of job a, then of job b.
__global__ void __launch_bounds__(kThreads)
    NormRopeQdqKernel(DeviceNormJob a, DeviceNormJob b, bool early) {
  const int64_t block = blockIdx.x;
  if (block < a.rows) {
    NormRopeQdqRow(a, block, early);
  } else {
    NormRopeQdqRow(b, block - a.rows, early);
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

bool ValidJob(const NormJob& j) {
  // As RmsNormRopeQdq checked before it was a job: the rotation first, then an empty job is
  // fine whatever its other fields.
  if (j.rope && (!ValidRope(*j.rope) || j.rope->head_dim != j.dim || j.rows % j.rope->heads != 0))
    return false;
  if (j.rows == 0) return true;
  if (j.rows < 0 || j.dim < 1) return false;
  return j.kv_packed == nullptr || (j.dim == kKvRowValues && j.y_fp8 == nullptr &&
                                    (reinterpret_cast<uintptr_t>(j.y) & 15) == 0 &&
                                    (reinterpret_cast<uintptr_t>(j.kv_packed) & 7) == 0);
}

DeviceNormJob ToDevice(const NormJob& j) {
  return {
      j.x, j.weight, j.rows,      j.dim,    j.eps, j.rope ? *j.rope : RopeArgs{}, j.rope != nullptr,
      j.y, j.y_fp8,  j.kv_packed, j.kv_dest};
}

}  // namespace

int RmsNormRopeQdqPair(const NormJob& a, const NormJob& b, void* stream) {
  if (!ValidJob(a) || !ValidJob(b)) return static_cast<int>(cudaErrorInvalidValue);
  if (a.rows + b.rows == 0) return 0;
  LaunchKernel(NormRopeQdqKernel, static_cast<unsigned>(a.rows + b.rows), kThreads, 0,
               static_cast<cudaStream_t>(stream), ToDevice(a), ToDevice(b), EarlyWeightLoads());
  return static_cast<int>(cudaGetLastError());
}

int RmsNormRopeQdq(const float* x, const float* weight, int64_t rows, int64_t dim, float eps,
                   const RopeArgs* rope, float* y, float* y_fp8, void* stream) {
  return RmsNormRopeQdqPair({x, weight, rows, dim, eps, rope, y, y_fp8}, NormJob{}, stream);
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
