#include <cuda_runtime.h>

#include "kernels/device_math.cuh"
#include "kernels/fused_glue.h"
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

// One Sinkhorn half-step on thread-held C: every row (Rows) or column divided by its sum + eps.
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

// The combination matrix from the row's dots d and the norm's inv (applied here): a row softmax
// + eps, a column normalisation, then iters - 1 row + column rounds — the CPU backend's sequence.
// With N * N <= 32 lane i * N + j holds C[i][j] and gathers its row or column by shuffles in the
// serial order, so the sums round exactly as one thread's would; wider matrices take lane 0.
template <int N>
__device__ void Sinkhorn(const float* d, float inv, const HyperWeights& w, float eps, int iters,
                         float* comb) {
  const int lane = threadIdx.x & 31;
  iters = iters > 1 ? iters : 1;
  if constexpr (N * N <= 32) {
    const int i = lane / N, j = lane % N, e = lane < N * N ? lane : 0;
    const auto row_sum = [&](float c) {
      float s = 0;
#pragma unroll
      for (int b = 0; b < N; ++b) s += __shfl_sync(0xffffffffu, c, (i * N + b) & 31);
      return s;
    };
    float c = d[2 * N + e] * inv * w.scale[2] + w.base[2 * N + e], mx = -INFINITY;
#pragma unroll
    for (int b = 0; b < N; ++b) mx = fmaxf(mx, __shfl_sync(0xffffffffu, c, (i * N + b) & 31));
    c = expf(c - mx);
    c = c * (1.0f / row_sum(c)) + eps;
    for (int it = 0; it < iters; ++it) {
      if (it > 0) c *= 1.0f / (row_sum(c) + eps);
      float s = 0;
#pragma unroll
      for (int a = 0; a < N; ++a) s += __shfl_sync(0xffffffffu, c, (a * N + j) & 31);
      c *= 1.0f / (s + eps);
    }
    if (lane < N * N) comb[lane] = c;
  } else if (lane == 0) {
    float C[N][N];
#pragma unroll
    for (int a = 0; a < N; ++a) {
      float mx = -INFINITY, s = 0;
#pragma unroll
      for (int b = 0; b < N; ++b) {
        C[a][b] = d[2 * N + a * N + b] * inv * w.scale[2] + w.base[2 * N + a * N + b];
        mx = fmaxf(mx, C[a][b]);
      }
#pragma unroll
      for (int b = 0; b < N; ++b) s += (C[a][b] = expf(C[a][b] - mx));
      const float r = 1.0f / s;
#pragma unroll
      for (int b = 0; b < N; ++b) C[a][b] = C[a][b] * r + eps;
    }
    for (int it = 0; it < iters; ++it) {
      if (it > 0) Normalize<N, true>(C, eps);
      Normalize<N, false>(C, eps);
    }
#pragma unroll
    for (int a = 0; a < N; ++a) {
#pragma unroll
      for (int b = 0; b < N; ++b) comb[a * N + b] = C[a][b];
    }
  }
}

constexpr int kCollapseThreads = 512;

// One block per row. Warp 0 adds the dots' slices (in a fixed order) and forms pre and post,
// then the Sinkhorn combination while the other warps collapse the streams with pre (Head: the
// HC head's n-weight form, all warps collapse). With `normed`, the block then applies the next
// RMSNorm to its collapsed row, so the layer's input norm costs no launch of its own, and with
// `normed_fp8` also writes the normed row's FP8 round trip (QdqFp8Rows' rounding) for the FP8
// products that read it.
template <int N, bool Head>
__global__ void __launch_bounds__(kCollapseThreads)
    HyperCollapseKernel(HyperWeights w, const float* streams, const float* dots, int64_t dim,
                        float norm_eps, float hc_eps, int iters, float* post, float* comb,
                        float* collapsed, const float* norm_weight, float* normed,
                        float* normed_fp8) {
  AwaitProducers();
  constexpr int kMix = Head ? N : (2 + N) * N;
  __shared__ float d[kMix + 1];
  __shared__ float pre[N];
  __shared__ float partial[kCollapseThreads / 32];
  const int64_t row = blockIdx.x;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (warp == 0) {
    for (int k = lane; k <= kMix; k += 32) {
      const float* slices = dots + (row * (kMix + 1) + k) * kHyperSlices;
      float sum = 0;
#pragma unroll
      for (int z = 0; z < kHyperSlices; ++z) sum += slices[z];
      d[k] = sum;
    }
    __syncwarp();
    const float inv = rsqrtf(d[kMix] / static_cast<float>(N * dim) + norm_eps);
    if (lane < N) {
      pre[lane] = 1.0f / (1.0f + expf(-(d[lane] * inv * w.scale[0] + w.base[lane]))) + hc_eps;
      if (!Head) {
        post[row * N + lane] =
            2.0f / (1.0f + expf(-(d[N + lane] * inv * w.scale[1] + w.base[N + lane])));
      }
    }
  }
  __syncthreads();
  const int first = Head ? 0 : 32;
  if constexpr (!Head) {
    if (warp == 0) {
      const float inv = rsqrtf(d[kMix] / static_cast<float>(N * dim) + norm_eps);
      Sinkhorn<N>(d, inv, w, hc_eps, iters, comb + row * N * N);
    }
  }
  const float* X = streams + row * N * dim;
  float* out = collapsed + row * dim;
  float ss = 0;
  if (static_cast<int>(threadIdx.x) >= first) {
    for (int64_t c = threadIdx.x - first; c < dim; c += kCollapseThreads - first) {
      float s = 0;
#pragma unroll
      for (int k = 0; k < N; ++k) s += pre[k] * X[k * dim + c];
      out[c] = s;
      ss += s * s;
    }
  }
  if (normed == nullptr) return;
  ss = WarpSum(ss);
  if (lane == 0) partial[warp] = ss;
  __syncthreads();  // also makes every thread's collapsed values visible to the block
  float total = 0;
#pragma unroll
  for (int k = 0; k < kCollapseThreads / 32; ++k) total += partial[k];
  const float inv = rsqrtf(total / static_cast<float>(dim) + norm_eps);
  // A warp per 128-wide block, so the FP8 round trip's block amax is a warp reduction.
  for (int64_t b0 = warp * 128; b0 < dim; b0 += kCollapseThreads / 32 * 128) {
    float v[4], amax = 0.0f;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int64_t c = b0 + lane * 4 + k;
      v[k] = c < dim ? out[c] * inv * (norm_weight ? norm_weight[c] : 1.0f) : 0.0f;
      amax = fmaxf(amax, fabsf(v[k]));
    }
    int e = 0;
    if (normed_fp8) {
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) {
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
      }
      e = E4M3ScaleExponent(amax, kActAmaxFloor);
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int64_t c = b0 + lane * 4 + k;
      if (c >= dim) continue;
      normed[row * dim + c] = v[k];
      if (normed_fp8) normed_fp8[row * dim + c] = QdqE4M3(v[k], e);
    }
  }
}

// The collapse kernel instantiated for n = N, or the next N up to 6.
template <int N, bool Head>
void LaunchCollapse(int n, HyperWeights w, const float* streams, const float* dots, int64_t rows,
                    int64_t dim, float norm_eps, float hc_eps, int iters, float* post, float* comb,
                    float* collapsed, const float* norm_weight, float* normed, float* normed_fp8,
                    cudaStream_t s) {
  if constexpr (N < 6) {
    if (n != N) {
      return LaunchCollapse<N + 1, Head>(n, w, streams, dots, rows, dim, norm_eps, hc_eps, iters,
                                         post, comb, collapsed, norm_weight, normed, normed_fp8, s);
    }
  }
  LaunchKernel(HyperCollapseKernel<N, Head>, static_cast<unsigned>(rows), kCollapseThreads, 0, s, w,
               streams, dots, dim, norm_eps, hc_eps, iters, post, comb, collapsed, norm_weight,
               normed, normed_fp8);
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
  LaunchCollapse<1, false>(n, w, streams, scratch, rows, dim, norm_eps, hc_eps, sinkhorn_iters,
                           post, comb, collapsed, norm_weight, normed, normed_fp8, s);
  return static_cast<int>(cudaGetLastError());
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
  LaunchCollapse<1, true>(n, w, streams, scratch, rows, dim, norm_eps, hc_eps, 0, nullptr, nullptr,
                          collapsed, norm_weight, normed, normed_fp8, s);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace deepinfer::kernels
