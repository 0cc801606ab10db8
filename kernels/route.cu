// Router, expert grouping and combine (kernels/route.h). Every sum the CPU takes in a fixed
// order is taken here in that order on one thread, with products and sums rounded one by one
// (__fmul_rn/__fadd_rn, and no contraction where the CPU has none), so the results are the
// CPU's bit for bit.
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>

#include "kernels/act_limbs.cuh"
#include "kernels/device_math.cuh"
#include "kernels/exact_math.h"
#include "kernels/launch.cuh"
#include "kernels/route.h"

namespace deepinfer::kernels {
namespace {

constexpr int kRouteThreads = 256, kGroupThreads = 1024;
static_assert(kMaxRouterExperts <= kGroupThreads, "GroupKernel scans one expert per thread");

__device__ __forceinline__ uint64_t WarpMax(uint64_t v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    const uint64_t o = __shfl_xor_sync(0xffffffffu, v, off);
    v = o > v ? o : v;
  }
  return v;
}

// Where RouteKernel also writes a one-token step's groups (group_rows 1), as GroupKernel would;
// null up: not written.
struct OneTokenGroups {
  ExpertGroup* up = nullptr;
  ExpertGroup* down = nullptr;
  int32_t* n_groups = nullptr;
};

// GroupKernel's one-row groups of token 0's K pairs: expert ascending, equal experts by slot.
__device__ void WriteOneTokenGroups(const int32_t* chosen, int K, int E, const OneTokenGroups& g) {
  int order[kMaxRouterTopK];
  int n = 0;
  for (int k = 0; k < K; ++k) {
    const int e = chosen[k];
    if (e < 0 || e >= E) continue;
    int i = n++;
    for (; i > 0 && chosen[order[i - 1]] > e; --i) order[i] = order[i - 1];
    order[i] = k;
  }
  for (int j = 0; j < n; ++j) {
    const int k = order[j];
    g.up[j].expert = g.down[j].expert = chosen[k];
    g.up[j].rows = g.down[j].rows = 1;
    g.up[j].x_row[0] = 0;
    g.up[j].y_row[0] = g.down[j].x_row[0] = g.down[j].y_row[0] = k;
  }
  *g.n_groups = n;
}

__global__ void __launch_bounds__(kRouteThreads)
    RouteKernel(const float* logits, const float* bias, const int32_t* tid2eid,
                const int32_t* tokens, RouterParams p, int32_t* experts, float* weights,
                OneTokenGroups groups, int64_t route_blocks, TokenLimbs limbs) {
  AwaitProducers();
  if (blockIdx.x >= route_blocks) {  // the token's activation limbs, a warp per 128 values
    const int64_t block =
        (blockIdx.x - route_blocks) * (kRouteThreads / 32) + static_cast<int64_t>(threadIdx.x >> 5);
    if (block < limbs.in / 128) {
      ActLimbsWarp(limbs.x, limbs.in, 0, block, limbs.limbs, limbs.scales, threadIdx.x & 31);
    }
    return;
  }
  __shared__ float score[kMaxRouterExperts];
  __shared__ uint64_t keys[kMaxRouterExperts];
  __shared__ uint64_t warp_best[kRouteThreads / 32];
  __shared__ float warp_max[kRouteThreads / 32];
  __shared__ int32_t chosen[kMaxRouterTopK];
  __shared__ float s_sum;
  const int64_t t = blockIdx.x;
  const int E = p.experts, K = p.top_k, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const float* lg = logits + t * E;
  for (int e = threadIdx.x; e < E; e += kRouteThreads) {
    const float x = lg[e];
    score[e] = p.scoring == RouterScoring::kSqrtSoftplus ? SqrtSoftplusF(x)
               : p.scoring == RouterScoring::kSigmoid    ? SigmoidF(x)
                                                         : x;
  }
  __syncthreads();
  if (p.scoring == RouterScoring::kSoftmax) {
    float mx = -INFINITY;
    for (int e = threadIdx.x; e < E; e += kRouteThreads) mx = fmaxf(mx, score[e]);
    for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
    if (lane == 0) warp_max[warp] = mx;
    __syncthreads();
    mx = -INFINITY;
    for (int w = 0; w < kRouteThreads / 32; ++w) mx = fmaxf(mx, warp_max[w]);
    for (int e = threadIdx.x; e < E; e += kRouteThreads) score[e] = ExpF(__fsub_rn(score[e], mx));
    __syncthreads();
    if (threadIdx.x == 0) {  // the CPU's sum, in expert order
      float s = 0.0f;
      for (int e = 0; e < E; ++e) s = __fadd_rn(s, score[e]);
      s_sum = s;
    }
    __syncthreads();
    for (int e = threadIdx.x; e < E; e += kRouteThreads) score[e] = __fdiv_rn(score[e], s_sum);
    __syncthreads();
  }
  if (tid2eid != nullptr) {
    if (threadIdx.x < K)
      chosen[threadIdx.x] = tid2eid[static_cast<int64_t>(tokens[t]) * K + threadIdx.x];
  } else {
    for (int e = threadIdx.x; e < E; e += kRouteThreads)
      keys[e] = RankKey(__fadd_rn(score[e], bias != nullptr ? bias[e] : 0.0f), e);
    __syncthreads();
    for (int k = 0; k < K; ++k) {
      uint64_t best = 0;
      for (int e = threadIdx.x; e < E; e += kRouteThreads) best = keys[e] > best ? keys[e] : best;
      best = WarpMax(best);
      if (lane == 0) warp_best[warp] = best;
      __syncthreads();
      if (threadIdx.x == 0) {
        uint64_t top = 0;
        for (int w = 0; w < kRouteThreads / 32; ++w) top = warp_best[w] > top ? warp_best[w] : top;
        const int e = static_cast<int>(0xffffffffu - static_cast<uint32_t>(top));
        chosen[k] = e;
        keys[e] = 0;
      }
      __syncthreads();
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float w[kMaxRouterTopK];
    float sum = 0.0f;
    for (int k = 0; k < K; ++k) sum = __fadd_rn(sum, w[k] = score[chosen[k]]);
    const float norm = p.norm_topk_prob ? __fdiv_rn(1.0f, __fadd_rn(sum, 1e-20f)) : 1.0f;
    const float factor = __fmul_rn(norm, p.routed_scaling);
    for (int k = 0; k < K; ++k) {
      experts[t * K + k] = chosen[k];
      weights[t * K + k] = __fmul_rn(w[k], factor);
    }
    if (groups.up != nullptr) WriteOneTokenGroups(chosen, K, E, groups);
  }
}

__global__ void __launch_bounds__(kGroupThreads)
    GroupKernel(const int32_t* experts, int64_t pairs, int K, int E, int R, int align,
                ExpertGroup* up, ExpertGroup* down, int32_t* n_groups, int32_t* rank) {
  AwaitProducers();
  __shared__ int cnt[kMaxRouterExperts];
  __shared__ int scan[kGroupThreads];
  __shared__ int chunk[kGroupThreads];
  const int tid = threadIdx.x;
  for (int e = tid; e < E; e += kGroupThreads) cnt[e] = 0;
  __syncthreads();
  // Rank of each pair among its expert's pairs, in pair order: the count before this chunk
  // plus the earlier pairs of this chunk (every thread reads chunk[j] in step: broadcasts).
  for (int64_t base = 0; base < pairs; base += kGroupThreads) {
    const int64_t p = base + tid;
    int e = p < pairs ? experts[p] : -1;
    if (e >= E) e = -1;
    chunk[tid] = e;
    __syncthreads();
    if (e >= 0) {
      int local = 0;
      for (int j = 0; j < tid; ++j) local += chunk[j] == e;
      rank[p] = cnt[e] + local;
    }
    __syncthreads();
    if (e >= 0) atomicAdd(&cnt[e], 1);
    __syncthreads();
  }
  // An expert's groups, padded with empty ones to a multiple of `align`.
  auto slots = [&](int e) { return ((cnt[e] + R - 1) / R + align - 1) / align * align; };
  const int groups = tid < E ? slots(tid) : 0;
  scan[tid] = groups;
  __syncthreads();
  for (int off = 1; off < kGroupThreads; off <<= 1) {  // inclusive scan
    const int v = tid >= off ? scan[tid - off] : 0;
    __syncthreads();
    scan[tid] += v;
    __syncthreads();
  }
  const int first = scan[tid] - groups;
  if (tid == kGroupThreads - 1) *n_groups = scan[tid];
  for (int j = 0; j < groups; ++j) {
    up[first + j].expert = down[first + j].expert = tid;
    up[first + j].rows = down[first + j].rows = max(0, min(R, cnt[tid] - j * R));
  }
  __syncthreads();
  for (int64_t p = tid; p < pairs; p += kGroupThreads) {
    const int e = experts[p];
    if (e < 0 || e >= E) continue;
    const int r = rank[p];
    const int g = scan[e] - slots(e) + r / R;
    const int slot = r % R;
    up[g].x_row[slot] = static_cast<int32_t>(p / K);
    up[g].y_row[slot] = down[g].x_row[slot] = down[g].y_row[slot] = static_cast<int32_t>(p);
  }
}

// CombineKernel's sum for token t, channel c: the experts in id order (equal ids by slot), as
// the CPU adds them (insertion sort of the K slots), then the shared expert. Every load is issued
// before the first addition: the slots' ids and products sit in registers, kMaxK of them (slots
// past K hold the largest id and add nothing), and an unrolled insertion sort orders them, so the
// sum waits on one memory latency instead of one a slot.
template <int kMaxK>
__device__ float CombinedChannel(const float* y, const int32_t* experts, const float* weights,
                                 const float* shared, int K, int64_t dim, int64_t t, int64_t c) {
  int id[kMaxK];
  float v[kMaxK];
#pragma unroll
  for (int k = 0; k < kMaxK; ++k) {
    const int64_t p = t * K + k;
    id[k] = k < K ? experts[p] : INT_MAX;
    v[k] = k < K ? __fmul_rn(y[p * dim + c], weights[p]) : 0.0f;
  }
  const float last = shared != nullptr ? shared[t * dim + c] : 0.0f;
#pragma unroll
  for (int i = 1; i < kMaxK; ++i) {
#pragma unroll
    for (int j = i; j > 0; --j) {  // strictly greater: equal ids keep their slots' order
      const bool swap = id[j - 1] > id[j];
      const int a = id[j - 1];
      const float x = v[j - 1];
      id[j - 1] = swap ? id[j] : a;
      v[j - 1] = swap ? v[j] : x;
      id[j] = swap ? a : id[j];
      v[j] = swap ? x : v[j];
    }
  }
  float acc = 0.0f;
#pragma unroll
  for (int k = 0; k < kMaxK; ++k) {
    if (k < K) acc = __fadd_rn(acc, v[k]);
  }
  return shared != nullptr ? __fadd_rn(acc, last) : acc;
}

template <int kMaxK>
__global__ void CombineKernel(const float* y, const int32_t* experts, const float* weights,
                              const float* shared, int K, int64_t dim, float* out) {
  AwaitProducers();
  const int64_t t = blockIdx.x;
  const int64_t c = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  if (c >= dim) return;
  out[t * dim + c] = CombinedChannel<kMaxK>(y, experts, weights, shared, K, dim, t, c);
}

// The combined channel straight into the mHC post (kernels/ops.cu's HyperPostKernel, the same
// roundings): out[t, j, c] = post[t, j] * h + sum over i of comb[t, i, j] * streams[t, i, c].
// kN: the stream count when fixed (V4's 4), whose inputs then load before the combine's sum.
template <int kMaxK, int kN>
__global__ void CombinePostKernel(const float* y, const int32_t* experts, const float* weights,
                                  const float* shared, int K, int64_t dim, HyperPostArgs post) {
  AwaitProducers();
  const int64_t t = blockIdx.x;
  const int64_t c = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  if (c >= dim) return;
  const int n = kN > 0 ? kN : post.n;
  const float* X = post.streams + t * n * dim;
  const float* C = post.comb + t * n * n;
  if constexpr (kN > 0) {
    float x[kN], comb[kN * kN], mix[kN];
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      x[i] = X[i * dim + c];
      mix[i] = post.post[t * kN + i];
    }
#pragma unroll
    for (int i = 0; i < kN * kN; ++i) comb[i] = C[i];
    const float h = CombinedChannel<kMaxK>(y, experts, weights, shared, K, dim, t, c);
#pragma unroll
    for (int j = 0; j < kN; ++j) {
      float s = __fmul_rn(mix[j], h);
#pragma unroll
      for (int i = 0; i < kN; ++i) s = __fadd_rn(s, __fmul_rn(comb[i * kN + j], x[i]));
      post.out[(t * kN + j) * dim + c] = s;
    }
  } else {
    const float h = CombinedChannel<kMaxK>(y, experts, weights, shared, K, dim, t, c);
    for (int j = 0; j < n; ++j) {
      float s = __fmul_rn(post.post[t * n + j], h);
      for (int i = 0; i < n; ++i) s = __fadd_rn(s, __fmul_rn(C[i * n + j], X[i * dim + c]));
      post.out[(t * n + j) * dim + c] = s;
    }
  }
}

bool BadRouterArgs(const int32_t* tid2eid, const int32_t* tokens, int64_t T,
                   const RouterParams& p) {
  return p.experts < 1 || p.experts > kMaxRouterExperts || p.top_k < 1 ||
         p.top_k > kMaxRouterTopK || p.top_k > p.experts || T < 0 || T > 0x7fffffffll ||
         (tid2eid != nullptr && !tokens);
}

}  // namespace

int RouteTokens(const float* logits, const float* bias, const int32_t* tid2eid,
                const int32_t* tokens, int64_t T, const RouterParams& p, int32_t* experts,
                float* weights, void* stream) {
  if (BadRouterArgs(tid2eid, tokens, T, p)) return cudaErrorInvalidValue;
  if (T == 0) return 0;
  LaunchKernel(RouteKernel, static_cast<unsigned>(T), kRouteThreads, 0,
               static_cast<cudaStream_t>(stream), logits, bias, tid2eid, tokens, p, experts,
               weights, OneTokenGroups{}, T, TokenLimbs{});
  return cudaGetLastError();
}

int RouteOneToken(const float* logits, const float* bias, const int32_t* tid2eid,
                  const int32_t* tokens, const RouterParams& p, int32_t* experts, float* weights,
                  ExpertGroup* up, ExpertGroup* down, int32_t* n_groups, void* stream,
                  const TokenLimbs* limbs) {
  if (BadRouterArgs(tid2eid, tokens, 1, p) || !up || !down || !n_groups ||
      (limbs != nullptr &&
       (limbs->in < 128 || limbs->in % 128 != 0 || !limbs->x || !limbs->limbs || !limbs->scales))) {
    return cudaErrorInvalidValue;
  }
  const TokenLimbs none{};
  const TokenLimbs& l = limbs != nullptr ? *limbs : none;
  constexpr int64_t kWarps = kRouteThreads / 32;
  const int64_t limb_blocks = (l.in / 128 + kWarps - 1) / kWarps;
  LaunchKernel(RouteKernel, static_cast<unsigned>(1 + limb_blocks), kRouteThreads, 0,
               static_cast<cudaStream_t>(stream), logits, bias, tid2eid, tokens, p, experts,
               weights, OneTokenGroups{up, down, n_groups}, int64_t{1}, l);
  return cudaGetLastError();
}

int64_t MaxExpertGroups(int64_t pairs, int experts, int group_rows, int align) {
  const int64_t by_rows = (pairs + group_rows - 1) / group_rows;
  const int64_t used = std::min<int64_t>(experts, pairs);  // experts with a group
  return std::min<int64_t>(pairs, by_rows + used) + (align - 1) * used;
}

int BuildExpertGroups(const int32_t* experts, int64_t pairs, int top_k, int n_experts,
                      int group_rows, ExpertGroup* up, ExpertGroup* down, int32_t* n_groups,
                      int32_t* rank_scratch, void* stream, int align) {
  if (n_experts < 1 || n_experts > kMaxRouterExperts || top_k < 1 || pairs < 0 ||
      pairs > 0x7fffffffll || group_rows < 1 || group_rows > kExpertGroupRows || align < 1 ||
      align > kMaxGroupAlign) {
    return cudaErrorInvalidValue;
  }
  LaunchKernel(GroupKernel, 1, kGroupThreads, 0, static_cast<cudaStream_t>(stream), experts, pairs,
               top_k, n_experts, group_rows, align, up, down, n_groups, rank_scratch);
  return cudaGetLastError();
}

int CombineExperts(const float* y, const int32_t* experts, const float* weights,
                   const float* shared, int64_t T, int K, int64_t dim, float* out, void* stream) {
  if (K < 1 || K > kMaxRouterTopK || dim < 1 || dim > 65535 * 256ll || T < 0 || T > 0x7fffffffll) {
    return cudaErrorInvalidValue;
  }
  if (T == 0) return 0;
  const dim3 grid(static_cast<unsigned>(T), static_cast<unsigned>((dim + 255) / 256));
  const auto kernel = K <= 8 ? CombineKernel<8> : CombineKernel<kMaxRouterTopK>;
  LaunchKernel(kernel, grid, 256, 0, static_cast<cudaStream_t>(stream), y, experts, weights, shared,
               K, dim, out);
  return cudaGetLastError();
}

int CombineExpertsPost(const float* y, const int32_t* experts, const float* weights,
                       const float* shared, int64_t T, int K, int64_t dim,
                       const HyperPostArgs& post, void* stream) {
  if (K < 1 || K > kMaxRouterTopK || dim < 1 || dim > 65535 * 128ll || T < 0 || T > 0x7fffffffll ||
      post.n < 1 || !post.streams || !post.post || !post.comb || !post.out) {
    return cudaErrorInvalidValue;
  }
  if (T == 0) return 0;
  // 128 threads a block: a one-token step still spreads over 32 blocks.
  const dim3 grid(static_cast<unsigned>(T), static_cast<unsigned>((dim + 127) / 128));
  const auto kernel = K <= 8 ? (post.n == 4 ? CombinePostKernel<8, 4> : CombinePostKernel<8, 0>)
                             : (post.n == 4 ? CombinePostKernel<kMaxRouterTopK, 4>
                                            : CombinePostKernel<kMaxRouterTopK, 0>);
  LaunchKernel(kernel, grid, 128, 0, static_cast<cudaStream_t>(stream), y, experts, weights, shared,
               K, dim, post);
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
