#include <cuda_runtime.h>

#include "kernels/device_math.cuh"
#include "kernels/norm_fast.h"

namespace deepinfer::kernels {
namespace {

constexpr int kThreads = 256;

__device__ float BlockSum(float v) {
  __shared__ float partial[kThreads / 32];
  v = WarpSum(v);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
  __syncthreads();
  float s = 0;
#pragma unroll
  for (int w = 0; w < kThreads / 32; ++w) s += partial[w];
  __syncthreads();  // partial may be reused by the caller's next reduction
  return s;
}

__global__ void __launch_bounds__(kThreads)
    RmsNormKernel(const float* x, const float* weight, int64_t dim, float eps, float* y) {
  const float* xr = x + blockIdx.x * dim;
  float ss = 0;
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) ss += xr[i] * xr[i];
  const float inv = rsqrtf(BlockSum(ss) / static_cast<float>(dim) + eps);
  float* yr = y + blockIdx.x * dim;
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) {
    yr[i] = xr[i] * inv * (weight ? weight[i] : 1.0f);
  }
}

// Block (row, k, slice): slice `slice` of the dot of mixing weight k with the row (k == mix: its
// sum of squares). One row's 25 reductions in 16 slices keep a batch of one busy; the slices are
// added in a fixed order afterwards, so results do not depend on scheduling.
__global__ void __launch_bounds__(kThreads)
    HyperDotsKernel(const float* fn, const float* streams, int64_t flat, int mix, float* out) {
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
  s = BlockSum(s);
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
      const float sum = BlockSum(acc[r][k]);
      if (row0 + r < rows && threadIdx.x < kHyperSlices) {
        out[((row0 + r) * (kMix + 1) + k) * kHyperSlices + threadIdx.x] =
            threadIdx.x == 0 ? sum : 0.0f;
      }
    }
  }
}

// One Sinkhorn half-step: every row (Rows) or every column of C divided by its sum + eps.
template <int N, bool Rows>
__device__ __forceinline__ void Normalize(float (&C)[N][N], float eps) {
#pragma unroll
  for (int a = 0; a < N; ++a) {
    float s = 0;
#pragma unroll
    for (int b = 0; b < N; ++b) s += Rows ? C[a][b] : C[b][a];
    const float r = 1.0f / (s + eps);
#pragma unroll
    for (int b = 0; b < N; ++b) (Rows ? C[a][b] : C[b][a]) *= r;
  }
}

// Block (row, chunk): thread 0 turns the row's dots into pre/post/comb (Sinkhorn on N x N is a
// few hundred flops, cheaper to redo per block than to launch for; N is a template argument so
// the matrix lives in registers), then the collapse.
template <int N>
__global__ void __launch_bounds__(kThreads)
    HyperCollapseKernel(HyperWeights w, const float* streams, const float* dots, int64_t dim,
                        float norm_eps, float hc_eps, int iters, float* post, float* comb,
                        float* collapsed) {
  constexpr int kMix = (2 + N) * N;
  __shared__ float pre[N];
  const int64_t row = blockIdx.x;
  if (threadIdx.x == 0) {
    float d[kMix + 1];
#pragma unroll
    for (int k = 0; k <= kMix; ++k) {
      const float* slices = dots + (row * (kMix + 1) + k) * kHyperSlices;
      float sum = 0;
#pragma unroll
      for (int z = 0; z < kHyperSlices; ++z) sum += slices[z];
      d[k] = sum;
    }
    const float inv = rsqrtf(d[kMix] / static_cast<float>(N * dim) + norm_eps);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      pre[k] = 1.0f / (1.0f + expf(-(d[k] * inv * w.scale[0] + w.base[k]))) + hc_eps;
    }
    if (blockIdx.y == 0) {
      float C[N][N];
#pragma unroll
      for (int k = 0; k < N; ++k) {
        post[row * N + k] = 2.0f / (1.0f + expf(-(d[N + k] * inv * w.scale[1] + w.base[N + k])));
      }
#pragma unroll
      for (int i = 0; i < N; ++i) {
        float mx = -INFINITY, s = 0;
#pragma unroll
        for (int j = 0; j < N; ++j) {
          C[i][j] = d[2 * N + i * N + j] * inv * w.scale[2] + w.base[2 * N + i * N + j];
          mx = fmaxf(mx, C[i][j]);
        }
#pragma unroll
        for (int j = 0; j < N; ++j) s += (C[i][j] = expf(C[i][j] - mx));
        const float r = 1.0f / s;
#pragma unroll
        for (int j = 0; j < N; ++j) C[i][j] = C[i][j] * r + hc_eps;
      }
      for (int it = 0; it < (iters > 1 ? iters : 1); ++it) {
        if (it > 0) Normalize<N, true>(C, hc_eps);
        Normalize<N, false>(C, hc_eps);
      }
#pragma unroll
      for (int i = 0; i < N; ++i) {
#pragma unroll
        for (int j = 0; j < N; ++j) comb[(row * N + i) * N + j] = C[i][j];
      }
    }
  }
  __syncthreads();
  const float* X = streams + row * N * dim;
  const int64_t c = static_cast<int64_t>(blockIdx.y) * kThreads + threadIdx.x;
  if (c >= dim) return;
  float s = 0;
#pragma unroll
  for (int k = 0; k < N; ++k) s += pre[k] * X[k * dim + c];
  collapsed[row * dim + c] = s;
}

// The collapse kernel instantiated for n = N, or the next N up to 6.
template <int N>
void LaunchCollapse(int n, HyperWeights w, const float* streams, const float* dots, int64_t rows,
                    int64_t dim, float norm_eps, float hc_eps, int iters, float* post, float* comb,
                    float* collapsed, cudaStream_t s) {
  if constexpr (N < 6) {
    if (n != N) {
      return LaunchCollapse<N + 1>(n, w, streams, dots, rows, dim, norm_eps, hc_eps, iters, post,
                                   comb, collapsed, s);
    }
  }
  const dim3 grid(static_cast<unsigned>(rows),
                  static_cast<unsigned>((dim + kThreads - 1) / kThreads));
  HyperCollapseKernel<N><<<grid, kThreads, 0, s>>>(w, streams, dots, dim, norm_eps, hc_eps, iters,
                                                   post, comb, collapsed);
}

}  // namespace

int RmsNormFast(const float* x, const float* weight, int64_t rows, int64_t dim, float eps, float* y,
                void* stream) {
  if (rows == 0) return 0;
  RmsNormKernel<<<static_cast<unsigned>(rows), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      x, weight, dim, eps, y);
  return static_cast<int>(cudaGetLastError());
}

int HyperPreFast(HyperWeights w, const float* streams, int64_t rows, int n, int64_t dim,
                 float norm_eps, float hc_eps, int sinkhorn_iters, float* post, float* comb,
                 float* collapsed, float* scratch, void* stream) {
  if (n < 1 || n > 6 || (n * dim) % 4 != 0) return static_cast<int>(cudaErrorInvalidValue);
  if (rows == 0) return 0;
  auto s = static_cast<cudaStream_t>(stream);
  const int mix = (2 + n) * n;
  if (rows >= 64 && n == 4) {  // V4's four streams; other widths take the sliced path
    HyperRowDotsKernel<4>
        <<<static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock), kThreads, 0, s>>>(
            w.fn, streams, rows, n * dim, scratch);
  } else {
    HyperDotsKernel<<<dim3(static_cast<unsigned>(rows), mix + 1, kHyperSlices), kThreads, 0, s>>>(
        w.fn, streams, n * dim, mix, scratch);
  }
  LaunchCollapse<1>(n, w, streams, scratch, rows, dim, norm_eps, hc_eps, sinkhorn_iters, post, comb,
                    collapsed, s);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace deepinfer::kernels
