#include <cuda_runtime.h>

#include "kernels/device_math.cuh"
#include "kernels/fused_glue.h"
#include "kernels/hyper_collapse.h"
#include "kernels/launch.cuh"
#include "kernels/norm_fast.h"

namespace deepinfer::kernels {
namespace {

constexpr int kThreads = 256;

// Block (row, k, slice): slice `slice` of the dot of mixing weight k with the row (k == mix: its
// sum of squares). One row's 25 reductions in 16 slices keep a batch of one busy; the slices are
// added in a fixed order afterwards, so results do not depend on scheduling.
__global__ void __launch_bounds__(kThreads)
    HyperDotsKernel(const float* fn, const float* streams, int64_t flat, int mix, float* out) {
  AwaitProducers();
  const int k = blockIdx.y;
  const int64_t quads = flat / 4, per = (quads + kHyperSlices - 1) / kHyperSlices;
  const int64_t begin = blockIdx.z * per, end = begin + per < quads ? begin + per : quads;
  const float4* X = reinterpret_cast<const float4*>(streams + blockIdx.x * flat);
  const float4* W = reinterpret_cast<const float4*>(k < mix ? fn + k * flat : nullptr);
  float s = 0;
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    const float4 x = X[i];
    const float4 w = k < mix ? W[i] : x;
    s += x.x * w.x + x.y * w.y + x.z * w.z + x.w * w.w;
  }
  s = BlockSum<kThreads>(s);
  if (threadIdx.x == 0) {
    out[(static_cast<int64_t>(blockIdx.x) * (mix + 1) + k) * kHyperSlices + blockIdx.z] = s;
  }
}

// Many rows (prefill, large batches): block r takes kRowsPerBlock rows and forms all their
// dots from one read of each row, so the mixing weights are read once per kRowsPerBlock rows
// from L2 instead of each row being read (2 + N) * N + 1 times from HBM. The result goes to
// slice 0 of the scratch (the other slices zero) so the collapse kernel reads it unchanged.
constexpr int kRowsPerBlock = 4;
template <int N>
__global__ void __launch_bounds__(kThreads)
    HyperRowDotsKernel(const float* fn, const float* streams, int64_t rows, int64_t flat,
                       float* out) {
  AwaitProducers();
  constexpr int kMix = (2 + N) * N;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock;
  float acc[kRowsPerBlock][kMix + 1] = {};
  for (int64_t i = threadIdx.x; i < flat / 4; i += kThreads) {
    float4 x[kRowsPerBlock];
#pragma unroll
    for (int r = 0; r < kRowsPerBlock; ++r) {
      x[r] = row0 + r < rows ? reinterpret_cast<const float4*>(streams + (row0 + r) * flat)[i]
                             : make_float4(0, 0, 0, 0);
      acc[r][kMix] += x[r].x * x[r].x + x[r].y * x[r].y + x[r].z * x[r].z + x[r].w * x[r].w;
    }
#pragma unroll
    for (int k = 0; k < kMix; ++k) {
      const float4 w = reinterpret_cast<const float4*>(fn + k * flat)[i];
#pragma unroll
      for (int r = 0; r < kRowsPerBlock; ++r) {
        acc[r][k] += x[r].x * w.x + x[r].y * w.y + x[r].z * w.z + x[r].w * w.w;
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRowsPerBlock; ++r) {
#pragma unroll
    for (int k = 0; k <= kMix; ++k) {
      const float sum = BlockSum<kThreads>(acc[r][k]);
      if (row0 + r < rows && threadIdx.x < kHyperSlices) {
        out[((row0 + r) * (kMix + 1) + k) * kHyperSlices + threadIdx.x] =
            threadIdx.x == 0 ? sum : 0.0f;
      }
    }
  }
}

}  // namespace

int RmsNormFast(const float* x, const float* weight, int64_t rows, int64_t dim, float eps, float* y,
                void* stream) {
  return RmsNormRopeQdq(x, weight, rows, dim, eps, nullptr, y, nullptr, stream);
}

int HyperPreFast(HyperWeights w, const float* streams, int64_t rows, int n, int64_t dim,
                 float norm_eps, float hc_eps, int sinkhorn_iters, float* post, float* comb,
                 float* collapsed, float* scratch, void* stream, const float* norm_weight,
                 float* normed, float* normed_fp8) {
  if (n < 1 || n > 6 || (n * dim) % 4 != 0 || (normed_fp8 && !normed)) {
    return static_cast<int>(cudaErrorInvalidValue);
  }
  if (rows == 0) return 0;
  auto s = static_cast<cudaStream_t>(stream);
  const int mix = (2 + n) * n;
  if (rows >= 64 && n == 4) {  // V4's four streams; other widths take the sliced path
    LaunchKernel(HyperRowDotsKernel<4>,
                 static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock), kThreads, 0, s,
                 w.fn, streams, rows, n * dim, scratch);
  } else {
    LaunchKernel(HyperDotsKernel, dim3(static_cast<unsigned>(rows), mix + 1, kHyperSlices),
                 kThreads, 0, s, w.fn, streams, n * dim, mix, scratch);
  }
  if (const int e = static_cast<int>(cudaGetLastError())) return e;
  return HyperCollapse(n, /*head=*/false, w, streams, scratch, rows, dim, norm_eps, hc_eps,
                       sinkhorn_iters, post, comb, collapsed, norm_weight, normed, normed_fp8, s);
}

int HyperHeadFast(HyperWeights w, const float* streams, int64_t rows, int n, int64_t dim,
                  float norm_eps, float hc_eps, float* collapsed, float* scratch, void* stream,
                  const float* norm_weight, float* normed, float* normed_fp8) {
  if (n < 1 || n > 6 || (n * dim) % 4 != 0 || (normed_fp8 && !normed)) {
    return static_cast<int>(cudaErrorInvalidValue);
  }
  if (rows == 0) return 0;
  auto s = static_cast<cudaStream_t>(stream);
  LaunchKernel(HyperDotsKernel, dim3(static_cast<unsigned>(rows), n + 1, kHyperSlices), kThreads, 0,
               s, w.fn, streams, n * dim, n, scratch);
  if (const int e = static_cast<int>(cudaGetLastError())) return e;
  return HyperCollapse(n, /*head=*/true, w, streams, scratch, rows, dim, norm_eps, hc_eps, 0,
                       nullptr, nullptr, collapsed, norm_weight, normed, normed_fp8, s);
}

}  // namespace deepinfer::kernels
