#include <cuda_runtime.h>

#include "kernels/device_math.cuh"
#include "kernels/hyper_collapse.h"
#include "kernels/launch.cuh"
#include "kernels/norm_fast.h"

namespace deepinfer::kernels {
namespace {

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
// scale2 and base_e: w.scale[2] and lane e's w.base[2 * N + e], loaded by the caller before its
// wait (the shuffle path's only weights).
template <int N>
__device__ void Sinkhorn(const float* d, float inv, const HyperWeights& w, float scale2,
                         float base_e, float eps, int iters, float* comb) {
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
    float c = d[2 * N + e] * inv * scale2 + base_e, mx = -INFINITY;
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
// A row's cluster: kClusterBlocks blocks, each with kCollapseWarps warps that take 128-column
// chunks (a lane four columns) and one more warp that forms post and the Sinkhorn combination in
// the cluster's first block while the others collapse. With V4's 4,096 columns every collapse
// warp takes exactly one chunk.
constexpr int kClusterBlocks = 8;
constexpr int kCollapseWarps = 4;
constexpr int kCollapseThreads = (kCollapseWarps + 1) * 32;

// Distributed shared memory needs every block of the cluster running before it is written; the
// relaxed arrive at the start and this wait before the first remote store give that cheaply.
__device__ __forceinline__ void ClusterArriveRelaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}
__device__ __forceinline__ void ClusterArrive() {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}
__device__ __forceinline__ void ClusterWait() {
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// `to`'s address in the shared memory of the cluster's block `rank`, written with
// st.shared::cluster.
__device__ __forceinline__ void StoreToClusterBlock(float* to, unsigned rank, float v) {
  const unsigned local = static_cast<unsigned>(__cvta_generic_to_shared(to));
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(rank));
  asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(remote), "f"(v) : "memory");
}

// The row's first `count` summed dots, each of its kHyperSlices slices added in a fixed order.
__device__ __forceinline__ void SumDots(const float* dots, int64_t row, int per_row, int count,
                                        int lane, float* d) {
  for (int k = lane; k < count; k += 32) {
    const float* slices = dots + (row * per_row + k) * kHyperSlices;
    float sum = 0;
#pragma unroll
    for (int z = 0; z < kHyperSlices; ++z) sum += slices[z];
    d[k] = sum;
  }
  __syncwarp();
}

// Block (rank, row) of a row's cluster. The collapse warps of every block form pre from the dots,
// collapse their chunks, and write their block's sum of squares into every block of the cluster;
// after one cluster barrier each block adds the kClusterBlocks sums in rank order (the same total
// everywhere) and normalises its chunks, with the FP8 round trip (QdqFp8Rows' rounding) when
// `normed_fp8` is given. Head: the HC head's n weights; no post, no combination.
template <int N, bool Head>
__global__ void __cluster_dims__(kClusterBlocks, 1, 1) __launch_bounds__(kCollapseThreads)
    HyperCollapseKernel(HyperWeights w, const float* streams, const float* dots, int64_t dim,
                        float norm_eps, float hc_eps, int iters, float* post, float* comb,
                        float* collapsed, const float* norm_weight, float* normed,
                        float* normed_fp8, bool early) {
  constexpr int kMix = Head ? N : (2 + N) * N;
  const unsigned rank = blockIdx.x;  // the grid is one cluster wide
  const int64_t row = blockIdx.y;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t chunks = (dim + 127) / 128;
  const int64_t first = rank + static_cast<int64_t>(kClusterBlocks) * warp;
  // Settled weights before the wait: the warp's first chunk of the norm's weights, and the mHC
  // weights that pre (warp 0), post and the combination (the Sinkhorn warp) take.
  const int e = N * N <= 32 && lane < N * N ? lane : 0;
  float kept_weight[4] = {1.0f, 1.0f, 1.0f, 1.0f}, scale = 0.0f, scale2 = 0.0f, base = 0.0f;
  float base_e = 0.0f;
  const auto load_weights = [&] {
    if (warp == kCollapseWarps) {
      if (!Head && rank == 0) {
        scale = w.scale[1];
        scale2 = w.scale[2];
        base = lane < N ? w.base[N + lane] : 0.0f;
        base_e = N * N <= 32 ? w.base[2 * N + e] : 0.0f;
      }
      return;
    }
    if (warp == 0) {
      scale = w.scale[0];
      base = lane < N ? w.base[lane] : 0.0f;
    }
    if (first < chunks && norm_weight != nullptr) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int64_t c = first * 128 + lane * 4 + j;
        kept_weight[j] = c < dim ? norm_weight[c] : 1.0f;
      }
    }
  };
  if (early) load_weights();
  AwaitProducers();
  if (!early) load_weights();
  ClusterArriveRelaxed();
  __shared__ float d[kMix + 1];
  __shared__ float pre[N];
  __shared__ float warp_ss[kCollapseWarps];
  __shared__ float block_ss[kClusterBlocks];
  if (warp == kCollapseWarps) {  // post and the combination, off the collapse's path
    ClusterWait();
    ClusterArrive();  // before the Sinkhorn, so the cluster's barrier does not wait for it
    if (!Head && rank == 0) {
      SumDots(dots, row, kMix + 1, kMix + 1, lane, d);
      const float inv = rsqrtf(d[kMix] / static_cast<float>(N * dim) + norm_eps);
      if (lane < N) {
        post[row * N + lane] = 2.0f / (1.0f + expf(-(d[N + lane] * inv * scale + base)));
      }
      Sinkhorn<N>(d, inv, w, scale2, base_e, hc_eps, iters, comb + row * N * N);
    }
    __syncwarp();  // the .aligned barrier wants the warp converged after Sinkhorn's lane-0 path
    ClusterWait();
    return;
  }
  // The warp's first chunk (V4's only one) of the streams loads before pre is known, and keeps
  // its sums and norm weights in registers for the normalisation after the cluster barrier.
  const float* X = streams + row * N * dim;
  const auto load_chunk = [&](int64_t q, float(&x)[N][4]) {
#pragma unroll
    for (int k = 0; k < N; ++k) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int64_t c = q * 128 + lane * 4 + j;
        x[k][j] = c < dim ? X[k * dim + c] : 0.0f;
      }
    }
  };
  float x[N][4];
  if (first < chunks) load_chunk(first, x);
  if (warp == 0) {
    // pre needs only the first N dots and the sum of squares; d[N..] is the other warp's.
    __shared__ float pre_dots[N + 1];
    SumDots(dots, row, kMix + 1, N, lane, pre_dots);
    if (lane == 0) {
      const float* slices = dots + (row * (kMix + 1) + kMix) * kHyperSlices;
      float sum = 0;
#pragma unroll
      for (int z = 0; z < kHyperSlices; ++z) sum += slices[z];
      pre_dots[N] = sum;
    }
    __syncwarp();
    const float inv = rsqrtf(pre_dots[N] / static_cast<float>(N * dim) + norm_eps);
    if (lane < N) pre[lane] = 1.0f / (1.0f + expf(-(pre_dots[lane] * inv * scale + base))) + hc_eps;
  }
  // The collapse warps' own barrier (id 1): the Sinkhorn warp does not wait for them.
  asm volatile("bar.sync 1, %0;" ::"r"(kCollapseWarps * 32) : "memory");
  float* out = collapsed + row * dim;
  constexpr int64_t kStride = static_cast<int64_t>(kClusterBlocks) * kCollapseWarps;
  float ss = 0;
  float kept[4] = {};
  for (int64_t q = first; q < chunks; q += kStride) {
    if (q != first) load_chunk(q, x);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t c = q * 128 + lane * 4 + j;
      float s = 0;
#pragma unroll
      for (int k = 0; k < N; ++k) s += pre[k] * x[k][j];
      if (c < dim) out[c] = s;
      if (q == first) kept[j] = s;
      ss += s * s;
    }
  }
  ss = WarpSum(ss);
  if (lane == 0) warp_ss[warp] = ss;
  asm volatile("bar.sync 1, %0;" ::"r"(kCollapseWarps * 32) : "memory");
  ClusterWait();  // every block of the cluster is running: its shared memory may be written
  if (warp == 0 && lane < kClusterBlocks) {
    float mine = 0;
#pragma unroll
    for (int k = 0; k < kCollapseWarps; ++k) mine += warp_ss[k];
    StoreToClusterBlock(&block_ss[rank], static_cast<unsigned>(lane), mine);
  }
  __syncwarp();  // converged again after the lanes < kClusterBlocks stores
  ClusterArrive();
  ClusterWait();
  if (normed == nullptr) return;
  float total = 0;
#pragma unroll
  for (int k = 0; k < kClusterBlocks; ++k) total += block_ss[k];
  const float inv = rsqrtf(total / static_cast<float>(dim) + norm_eps);
  for (int64_t q = first; q < chunks; q += kStride) {
    float v[4], amax = 0.0f;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t c = q * 128 + lane * 4 + j;  // this thread's own stores above
      v[j] = 0.0f;
      if (c < dim) {  // past the row nothing is read: a later chunk's tail is out of bounds
        const float sum = q == first ? kept[j] : out[c];
        const float weight = q == first ? kept_weight[j] : norm_weight ? norm_weight[c] : 1.0f;
        v[j] = sum * inv * weight;
      }
      amax = fmaxf(amax, fabsf(v[j]));
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
    for (int j = 0; j < 4; ++j) {
      const int64_t c = q * 128 + lane * 4 + j;
      if (c >= dim) continue;
      normed[row * dim + c] = v[j];
      if (normed_fp8) normed_fp8[row * dim + c] = QdqE4M3(v[j], e);
    }
  }
}

// The kernel instantiated for n = N, or the next N up to 6.
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
  LaunchKernel(HyperCollapseKernel<N, Head>, dim3(kClusterBlocks, static_cast<unsigned>(rows)),
               kCollapseThreads, 0, s, w, streams, dots, dim, norm_eps, hc_eps, iters, post, comb,
               collapsed, norm_weight, normed, normed_fp8, EarlyWeightLoads());
}

}  // namespace

int HyperCollapse(int n, bool head, HyperWeights w, const float* streams, const float* dots,
                  int64_t rows, int64_t dim, float norm_eps, float hc_eps, int sinkhorn_iters,
                  float* post, float* comb, float* collapsed, const float* norm_weight,
                  float* normed, float* normed_fp8, void* stream) {
  if (n < 1 || n > 6 || dim < 1 || rows < 0 || rows > 65535 || (normed_fp8 && !normed)) {
    return static_cast<int>(cudaErrorInvalidValue);
  }
  if (rows == 0) return 0;
  auto s = static_cast<cudaStream_t>(stream);
  if (head) {
    LaunchCollapse<1, true>(n, w, streams, dots, rows, dim, norm_eps, hc_eps, 0, nullptr, nullptr,
                            collapsed, norm_weight, normed, normed_fp8, s);
  } else {
    LaunchCollapse<1, false>(n, w, streams, dots, rows, dim, norm_eps, hc_eps, sinkhorn_iters, post,
                             comb, collapsed, norm_weight, normed, normed_fp8, s);
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace deepinfer::kernels
