#include <cuda_runtime.h>

#include "kernels/exact_math.h"
#include "kernels/launch.cuh"
#include "kernels/ops.h"

namespace deepinfer::kernels {
namespace {

constexpr int kThreads = 256;

__device__ float BlockMax(float v, float* scratch) {
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float m = -INFINITY;
  for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) m = fmaxf(m, scratch[w]);
  return m;
}

// Lane `lane` of OrderedDot(a, b, n) with b[i] given by a functor (the mHC dots multiply the
// normalised input on the fly, as the CPU rounds it before its dot).
template <class B>
__device__ float OrderedLane(const float* a, B b, int64_t n, int lane) {
  float acc = 0;
  for (int64_t i = lane; i < n / 8 * 8; i += 8) acc += a[i] * b(i);
  return acc;
}

// OrderedDot's combination of eight lanes (lanes[0..7]) and its tail.
template <class B>
__device__ float OrderedFinish(const float* lanes, const float* a, B b, int64_t n) {
  float s = CombineLanes(lanes);
  for (int64_t i = n / 8 * 8; i < n; ++i) s += a[i] * b(i);
  return s;
}

__global__ void DotRowsKernel(const float* w, const float* x, int64_t rows, int64_t n_out,
                              int64_t in, float* y) {
  AwaitProducers();
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= rows * n_out) return;
  const int64_t r = idx / n_out, o = idx % n_out;
  y[idx] = OrderedDot(x + r * in, w + o * in, in);
}

__global__ void RmsNormKernel(const float* x, const float* weight, int64_t dim, float eps,
                              float* y) {
  AwaitProducers();
  __shared__ float inv_shared;
  const float* xr = x + blockIdx.x * dim;
  if (threadIdx.x == 0) {
    inv_shared = __fdiv_rn(
        1.0f,
        __fsqrt_rn(__fadd_rn(__fdiv_rn(OrderedDot(xr, xr, dim), static_cast<float>(dim)), eps)));
  }
  __syncthreads();
  const float inv = inv_shared;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    y[blockIdx.x * dim + i] = __fmul_rn(__fmul_rn(xr[i], inv), weight ? weight[i] : 1.0f);
  }
}

__global__ void RopeKernel(float* x, int64_t total, int heads, int head_dim, int rope_dim,
                           const float* inv_freq, const int64_t* positions, bool inverse) {
  AwaitProducers();
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int half = rope_dim / 2;
  if (idx >= total * half) return;
  const int64_t rh = idx / half;  // row * heads + head
  const int i = static_cast<int>(idx % half);
  const float angle = static_cast<float>(positions[rh / heads]) * inv_freq[i];
  const float c = static_cast<float>(cos(static_cast<double>(angle)));
  float s = static_cast<float>(sin(static_cast<double>(angle)));
  if (inverse) s = -s;
  float* p = x + rh * head_dim + head_dim - rope_dim + 2 * i;
  const float a = p[0], b = p[1];
  p[0] = a * c - b * s;
  p[1] = b * c + a * s;
}

__global__ void SwiGluKernel(const float* gate, const float* up, int64_t n, float limit,
                             float* out) {
  AwaitProducers();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[i] = SwiGluF(gate[i], up[i], limit);
}

// One block per row, in the CPU backend's order throughout: the sum of squares and each mixing dot
// run OrderedDot's eight lanes on eight threads and thread 0 finishes them; thread 0 then forms the
// pre/post weights and the Sinkhorn-normalised combination in the CPU's sequence.
template <bool Head>
__global__ void HyperKernel(HyperWeights w, const float* streams, int n, int64_t dim,
                            float norm_eps, float hc_eps, int iters, float* post, float* comb,
                            float* collapsed) {
  AwaitProducers();
  __shared__ float lanes[64 * 8];
  __shared__ float m[64];
  __shared__ float pre[8];
  __shared__ float inv_shared;
  const int64_t flat = n * dim;
  const float* X = streams + blockIdx.x * flat;
  const auto x = [X](int64_t i) { return X[i]; };
  if (threadIdx.x < 8) lanes[threadIdx.x] = OrderedLane(X, x, flat, threadIdx.x);
  __syncthreads();
  if (threadIdx.x == 0) {
    const float ss = OrderedFinish(lanes, X, x, flat);
    inv_shared = 1.0f / sqrtf(ss / static_cast<float>(flat) + norm_eps);
  }
  __syncthreads();
  const float inv = inv_shared;
  const auto normed = [X, inv](int64_t i) { return X[i] * inv; };
  const int mix = Head ? n : (2 + n) * n;
  for (int t = threadIdx.x; t < mix * 8; t += blockDim.x) {
    lanes[t] = OrderedLane(w.fn + (t / 8) * flat, normed, flat, t % 8);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int k = 0; k < mix; ++k)
      m[k] = OrderedFinish(lanes + 8 * k, w.fn + k * flat, normed, flat);
    for (int k = 0; k < n; ++k) pre[k] = SigmoidF(m[k] * w.scale[0] + w.base[k]) + hc_eps;
    if (!Head) {
      float* po = post + blockIdx.x * n;
      float* C = comb + blockIdx.x * n * n;
      for (int k = 0; k < n; ++k) po[k] = 2.0f * SigmoidF(m[n + k] * w.scale[1] + w.base[n + k]);
      for (int i = 0; i < n; ++i) {
        float mx = -INFINITY;
        for (int j = 0; j < n; ++j) {
          C[i * n + j] = m[2 * n + i * n + j] * w.scale[2] + w.base[2 * n + i * n + j];
          mx = fmaxf(mx, C[i * n + j]);
        }
        float s = 0;
        for (int j = 0; j < n; ++j) s += (C[i * n + j] = ExpF(C[i * n + j] - mx));
        for (int j = 0; j < n; ++j) C[i * n + j] = C[i * n + j] / s + hc_eps;
      }
      // As the CPU backend: a column normalisation, then iters - 1 row + column rounds.
      for (int it = 0; it < (iters > 1 ? iters : 1); ++it) {
        if (it > 0) {
          for (int i = 0; i < n; ++i) {
            float s = 0;
            for (int j = 0; j < n; ++j) s += C[i * n + j];
            for (int j = 0; j < n; ++j) C[i * n + j] /= s + hc_eps;
          }
        }
        for (int j = 0; j < n; ++j) {
          float s = 0;
          for (int i = 0; i < n; ++i) s += C[i * n + j];
          for (int i = 0; i < n; ++i) C[i * n + j] /= s + hc_eps;
        }
      }
    }
  }
  __syncthreads();
  for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) {
    float s = 0;
    for (int k = 0; k < n; ++k) s += pre[k] * X[k * dim + c];
    collapsed[blockIdx.x * dim + c] = s;
  }
}

// kN: the stream count when fixed (V4's 4). Its n weights and stream values then load before the
// first product instead of one pair of loads per step of the sum; the same sum either way.
template <int kN>
__global__ void HyperPostKernel(const float* streams, const float* y, const float* post,
                                const float* comb, int64_t total, int n, int64_t dim, float* out) {
  AwaitProducers();
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= total) return;
  if constexpr (kN > 0) n = kN;
  const int64_t c = idx % dim;
  const int64_t rj = idx / dim;
  const int j = static_cast<int>(rj % n);
  const int64_t r = rj / n;
  const float* X = streams + r * n * dim;
  const float* C = comb + r * n * n;
  float s = post[r * n + j] * y[r * dim + c];
  if constexpr (kN > 0) {
    float w[kN], x[kN];
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      w[i] = C[i * kN + j];
      x[i] = X[i * dim + c];
    }
#pragma unroll
    for (int i = 0; i < kN; ++i) s += w[i] * x[i];
  } else {
    for (int i = 0; i < n; ++i) s += C[i * n + j] * X[i * dim + c];
  }
  out[idx] = s;
}

// One block per (query, head); scores live in dynamic shared memory. The CPU's order: each score
// an OrderedDot, the denominator summed by one thread from the sink on, each output channel summed
// over the rows in turn.
__global__ void SparseAttentionKernel(const float* q, const float* rows, const int64_t* offsets,
                                      int heads, int head_dim, const float* sinks, float scale,
                                      float* o) {
  AwaitProducers();
  extern __shared__ float p[];
  __shared__ float scratch[32];
  __shared__ float denom_shared;
  const int64_t t = blockIdx.x / heads;
  const int h = static_cast<int>(blockIdx.x % heads);
  const float* qh = q + static_cast<int64_t>(blockIdx.x) * head_dim;
  const float* base = rows + offsets[t] * head_dim;
  const int n = static_cast<int>(offsets[t + 1] - offsets[t]);
  float mx = sinks[h];
  for (int e = threadIdx.x; e < n; e += blockDim.x) {
    p[e] = OrderedDot(qh, base + static_cast<int64_t>(e) * head_dim, head_dim) * scale;
    mx = fmaxf(mx, p[e]);
  }
  mx = BlockMax(mx, scratch);  // a maximum is the same in any order
  for (int e = threadIdx.x; e < n; e += blockDim.x) p[e] = ExpF(p[e] - mx);
  __syncthreads();
  if (threadIdx.x == 0) {
    float denom = ExpF(sinks[h] - mx);
    for (int e = 0; e < n; ++e) denom += p[e];
    denom_shared = denom;
  }
  __syncthreads();
  const float denom = denom_shared;
  float* oh = o + static_cast<int64_t>(blockIdx.x) * head_dim;
  for (int c = threadIdx.x; c < head_dim; c += blockDim.x) {
    float acc = 0;
    for (int e = 0; e < n; ++e) acc += p[e] / denom * base[static_cast<int64_t>(e) * head_dim + c];
    oh[c] = acc;
  }
}

__global__ void IndexerScoresKernel(const float* q, const float* w, int heads, int head_dim,
                                    const float* keys, int64_t n_keys, float* out) {
  AwaitProducers();
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= n_keys) return;
  const float* k = keys + j * head_dim;
  float s = 0;  // in the CPU backend's order, bit for bit
  for (int h = 0; h < heads; ++h) {
    s = __fadd_rn(s, __fmul_rn(w[h], fmaxf(OrderedDot(q + h * head_dim, k, head_dim), 0.0f)));
  }
  out[j] = s;
}

unsigned Blocks(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

}  // namespace

int DotRowsCpuOrder(const float* w, const float* x, int64_t rows, int64_t n_out, int64_t in,
                    float* y, void* stream) {
  if (rows * n_out == 0) return 0;
  LaunchKernel(DotRowsKernel, Blocks(rows * n_out), kThreads, 0, static_cast<cudaStream_t>(stream),
               w, x, rows, n_out, in, y);
  return static_cast<int>(cudaGetLastError());
}

int RmsNorm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps, float* y,
            void* stream) {
  if (rows == 0) return 0;
  LaunchKernel(RmsNormKernel, static_cast<unsigned>(rows), kThreads, 0,
               static_cast<cudaStream_t>(stream), x, weight, dim, eps, y);
  return static_cast<int>(cudaGetLastError());
}

int Rope(float* x, int64_t rows, int heads, int head_dim, int rope_dim, const float* inv_freq,
         const int64_t* positions, bool inverse, void* stream) {
  const int64_t total = rows * heads;
  if (total == 0 || rope_dim < 2) return 0;
  LaunchKernel(RopeKernel, Blocks(total * (rope_dim / 2)), kThreads, 0,
               static_cast<cudaStream_t>(stream), x, total, heads, head_dim, rope_dim, inv_freq,
               positions, inverse);
  return static_cast<int>(cudaGetLastError());
}

int SwiGlu(const float* gate, const float* up, int64_t n, float limit, float* out, void* stream) {
  if (n == 0) return 0;
  LaunchKernel(SwiGluKernel, Blocks(n), kThreads, 0, static_cast<cudaStream_t>(stream), gate, up, n,
               limit, out);
  return static_cast<int>(cudaGetLastError());
}

int HyperPre(HyperWeights w, const float* streams, int64_t rows, int n, int64_t dim, float norm_eps,
             float hc_eps, int sinkhorn_iters, float* post, float* comb, float* collapsed,
             void* stream) {
  if (n > 6) return static_cast<int>(cudaErrorInvalidValue);  // (2 + n) * n mix weights <= 64
  if (rows == 0) return 0;
  LaunchKernel(HyperKernel<false>, static_cast<unsigned>(rows), kThreads, 0,
               static_cast<cudaStream_t>(stream), w, streams, n, dim, norm_eps, hc_eps,
               sinkhorn_iters, post, comb, collapsed);
  return static_cast<int>(cudaGetLastError());
}

int HyperPost(const float* streams, const float* y, const float* post, const float* comb,
              int64_t rows, int n, int64_t dim, float* out, void* stream) {
  const int64_t total = rows * n * dim;
  if (total == 0) return 0;
  LaunchKernel(n == 4 ? HyperPostKernel<4> : HyperPostKernel<0>, Blocks(total), kThreads, 0,
               static_cast<cudaStream_t>(stream), streams, y, post, comb, total, n, dim, out);
  return static_cast<int>(cudaGetLastError());
}

int HyperHead(HyperWeights w, const float* streams, int64_t rows, int n, int64_t dim,
              float norm_eps, float hc_eps, float* out, void* stream) {
  if (n > 8) return static_cast<int>(cudaErrorInvalidValue);
  if (rows == 0) return 0;
  LaunchKernel(HyperKernel<true>, static_cast<unsigned>(rows), kThreads, 0,
               static_cast<cudaStream_t>(stream), w, streams, n, dim, norm_eps, hc_eps, 0, nullptr,
               nullptr, out);
  return static_cast<int>(cudaGetLastError());
}

int SparseAttention(const float* q, const float* rows, const int64_t* offsets, int64_t n_queries,
                    int heads, int head_dim, const float* sinks, float scale, float* o,
                    void* stream, int64_t max_rows) {
  if (n_queries == 0) return 0;
  const size_t smem = static_cast<size_t>(max_rows) * sizeof(float);
  if (smem > 200 * 1024) return static_cast<int>(cudaErrorInvalidValue);
  if (smem > 48 * 1024) {
    cudaFuncSetAttribute(SparseAttentionKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(smem));
  }
  LaunchKernel(SparseAttentionKernel, static_cast<unsigned>(n_queries * heads), kThreads, smem,
               static_cast<cudaStream_t>(stream), q, rows, offsets, heads, head_dim, sinks, scale,
               o);
  return static_cast<int>(cudaGetLastError());
}

int IndexerScores(const float* q, const float* w, int heads, int head_dim, const float* keys,
                  int64_t n_keys, float* out, void* stream) {
  if (n_keys == 0) return 0;
  LaunchKernel(IndexerScoresKernel, Blocks(n_keys), kThreads, 0, static_cast<cudaStream_t>(stream),
               q, w, heads, head_dim, keys, n_keys, out);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace deepinfer::kernels
