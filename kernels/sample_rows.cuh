// What the GPU sampler's kernels (kernels/sampling.cu, sample_greedy.cu, sample_topk.cu) share:
// a draw's row of logits as they read it (through the step's row index, masked ids at -inf), a
// warp's sums of a run of candidates in ChunkedPrefix's order (kernels/sample_pick.h), and the
// 32-way search the picks walk those sums with.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/sample_pick.h"

namespace deepinfer::kernels {

/// Draw `row`'s logits: logits row rows_of[row] (rows_of null: row itself), an id whose bit is
/// clear in the draw's mask row of `bitmask` (null: no mask) reading -inf.
struct MaskedRow {
  const float* x;
  const uint32_t* mask;

  __device__ static MaskedRow Of(const float* logits, int32_t vocab, const uint32_t* bitmask,
                                 const int32_t* rows_of, int64_t row) {
    return {logits + (rows_of ? static_cast<int64_t>(rows_of[row]) : row) * vocab,
            bitmask ? bitmask + row * ((vocab + 31) / 32) : nullptr};
  }
  __device__ float operator[](int64_t id) const {
    return mask && !((mask[id / 32] >> (id % 32)) & 1u) ? -INFINITY : x[id];
  }
};

/// Shared doubles a warp's WarpRunSum stages its terms and running sums in (16-byte aligned).
constexpr int kRunStage = 64;

/// A warp's sum from zero, in order, of term(i) for i in [begin, end) (one ChunkedPrefix run):
/// the lanes form 32 terms at once and stage them in shared memory; every lane then adds them in
/// order from broadcast reads (the same chain on each lane, so no lane waits for another; past
/// `end` the terms are +0, which changes no sum of non-negative terms), and lane 0 stages each
/// running sum for the lane that formed its term. keep(i, term, running sum after it) runs on
/// that lane. Every lane returns the run's sum. `stage`: kRunStage shared doubles of this warp.
template <typename Term, typename Keep>
__device__ double WarpRunSum(int32_t begin, int32_t end, Term term, Keep keep, double* stage) {
  const int lane = threadIdx.x % 32;
  double* terms = stage;
  double* sums = stage + 32;
  double sum = 0;
  for (int32_t t0 = begin; t0 < end; t0 += 32) {
    const int32_t i = t0 + lane;
    const double mine_term = i < end ? term(i) : 0.0;
    terms[lane] = mine_term;
    __syncwarp();
#pragma unroll
    for (int j = 0; j < 32; j += 2) {
      const double2 pair = reinterpret_cast<const double2*>(terms)[j / 2];
      sum += pair.x;
      if (lane == 0) sums[j] = sum;
      sum += pair.y;
      if (lane == 0) sums[j + 1] = sum;
    }
    __syncwarp();
    if (i < end) keep(i, mine_term, sums[lane]);
    __syncwarp();  // the next group's terms overwrite this one's
  }
  return sum;
}

/// Block (slice blockIdx.x of gridDim.x, ids [0, n) cut into slices of ceil(n / gridDim.x)): the
/// slice's sum of term(i), each of kThreads threads adding every kThreads-th id from its own in
/// order, each warp's sums joined by shuffles down, then the warps' in order from zero on thread
/// 0, whose return value is the block's (the others' are partial). `partial`: kThreads / 32
/// shared doubles.
template <int kThreads, typename Term>
__device__ double BlockSliceSum(int32_t n, Term term, double* partial) {
  const int32_t slice = static_cast<int32_t>((n + gridDim.x - 1) / gridDim.x);
  const int32_t end = min(n, static_cast<int32_t>(blockIdx.x + 1) * slice);
  double sum = 0;
  for (int32_t i = blockIdx.x * slice + threadIdx.x; i < end; i += kThreads) sum += term(i);
  for (int off = 16; off > 0; off /= 2) sum += __shfl_down_sync(0xffffffffu, sum, off);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x != 0) return sum;
  sum = 0;
  for (int w = 0; w < kThreads / 32; ++w) sum += partial[w];
  return sum;
}

/// base[r] for r in [0, runs]: the sum of runs 0 .. r-1 (run_sums), added in order from zero by
/// lane 0 as ChunkedPrefix does, eight runs' sums read ahead of their adds; base holds
/// kMaxSumRuns + 1 (shared memory). A whole warp calls.
__device__ inline void WarpRunBases(const double* run_sums, int32_t runs, double* base) {
  const int lane = threadIdx.x % 32;
  for (int32_t r = lane; r < runs; r += 32) base[r + 1] = run_sums[r];
  __syncwarp();
  if (lane == 0) {
    double b = 0;
    int32_t r = 0;
    for (; r + 8 <= runs; r += 8) {
      double s[8];
#pragma unroll
      for (int k = 0; k < 8; ++k) s[k] = base[r + 1 + k];
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        base[r + k] = b;
        b += s[k];
      }
    }
    for (; r < runs; ++r) {
      const double run_sum = base[r + 1];
      base[r] = b;
      b += run_sum;
    }
    base[runs] = b;
  }
  __syncwarp();
}

/// The first index in [lo, hi) where pass(i) holds, else hi; pass must never turn false again as
/// i grows. A warp probes 32 spaced indices a round (a 32-way search): every lane returns the
/// same.
template <typename Pass>
__device__ int32_t WarpFirstPass(int32_t lo, int32_t hi, Pass pass) {
  const int32_t lane = threadIdx.x % 32, none = hi;
  while (lo < hi) {
    const int32_t step = (hi - lo + 31) / 32, at = lo + lane * step;
    const uint32_t ballot = __ballot_sync(0xffffffffu, at >= hi || pass(at));
    if (ballot == 0) {  // past every probe
      lo = lo + 31 * step + 1;
      continue;
    }
    const int first = __ffs(ballot) - 1;
    if (first == 0) return lo;
    hi = min(hi, lo + first * step);
    lo = lo + (first - 1) * step + 1;
  }
  return lo < none ? lo : none;
}

}  // namespace deepinfer::kernels
