// The draws that need no sort (kernels/sampling.h): GreedyRows, IdOrderRows and UnsortedPicks.
// Each row is cut into kGreedySplits slices, one block a slice; a block finds its slice's
// largest masked logit (lowest id among equals) and, for rows asking for their log-probability,
// the slice's max and sum of exp(logit - max) in double. Greedy rows join their slices and are
// done; rows walking in id order then sum their terms in runs of kSumChunk ids, a warp a run,
// and one warp a row finds the draw among the runs' running sums.
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/launch.cuh"
#include "kernels/sample_pick.h"
#include "kernels/sample_rows.cuh"
#include "kernels/sampling.h"

namespace deepinfer::kernels {
namespace {

constexpr int kThreads = 256;

// A candidate by its DescendingKey (kernels/sample_pick.h): the smaller key, then the lower id,
// is the sort's earlier candidate, so the best of a row is the sort's first.
struct Best {
  uint32_t key;
  int32_t id;
};
__device__ __forceinline__ Best Better(Best a, Best b) {
  return (b.key < a.key || (b.key == a.key && b.id < a.id)) ? b : a;
}

// exp-sums with their own max: (m1, s1) + (m2, s2) rescaled to the larger max; empty parts
// (max -inf, sum 0) add nothing.
struct ExpSum {
  float max;
  double sum;
};
__device__ __forceinline__ ExpSum Join(ExpSum a, ExpSum b) {
  if (b.max == -INFINITY) return a;
  if (a.max == -INFINITY) return b;
  const float m = fmaxf(a.max, b.max);
  return {
      m, a.sum * exp(static_cast<double>(a.max) - m) + b.sum * exp(static_cast<double>(b.max) - m)};
}

template <typename T, typename F>
__device__ T BlockJoin(T v, F join, T* shared) {
  for (int off = 16; off > 0; off /= 2) {
    T other;
    static_assert(sizeof(T) % 4 == 0);
    auto* src = reinterpret_cast<uint32_t*>(&v);
    auto* dst = reinterpret_cast<uint32_t*>(&other);
    for (int w = 0; w < static_cast<int>(sizeof(T) / 4); ++w)
      dst[w] = __shfl_down_sync(0xffffffffu, src[w], off);
    v = join(v, other);
  }
  if ((threadIdx.x & 31) == 0) shared[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) v = join(v, shared[w]);
  }
  return v;  // thread 0's is the block's
}

// Block (slice, row): the slice's best candidate and, when the row asks, its exp-sum; for rows
// walking in id order, and for greedy rows with greedy_rows (SampleRows draws those from its
// sort, so it reads no slices for them or for its other rows).
__global__ void __launch_bounds__(kThreads)
    GreedySliceKernel(const float* logits, int32_t vocab, const uint32_t* bitmask,
                      const SampleParams* params, const int32_t* rows_of, bool greedy_rows,
                      Best* best_out, ExpSum* sums_out) {
  AwaitProducers();
  __shared__ Best best_shared[kThreads / 32];
  __shared__ ExpSum sums_shared[kThreads / 32];
  const int64_t row = blockIdx.y;
  const SampleParams& c = params[row];
  if (!(greedy_rows && IsGreedy(c.temperature, c.top_k)) &&
      !WalksIdOrder(c.temperature, c.top_k, c.top_p, vocab)) {
    return;
  }
  const int32_t slice = (vocab + gridDim.x - 1) / gridDim.x;
  const int32_t begin = blockIdx.x * slice, end = min(vocab, begin + slice);
  const MaskedRow x = MaskedRow::Of(logits, vocab, bitmask, rows_of, row);
  const bool want_sum = params[row].logprob != 0;
  Best best{UINT32_MAX, INT32_MAX};  // after every candidate
  ExpSum sum{-INFINITY, 0.0};
  for (int32_t i = begin + threadIdx.x; i < end; i += kThreads) {
    const float v = x[i];
    best = Better(best, {DescendingKey(v), i});
    if (want_sum && v != -INFINITY) sum = Join(sum, {v, 1.0});
  }
  best = BlockJoin(best, Better, best_shared);
  if (want_sum) sum = BlockJoin(sum, Join, sums_shared);
  if (threadIdx.x == 0) {
    best_out[row * gridDim.x + blockIdx.x] = best;
    sums_out[row * gridDim.x + blockIdx.x] = sum;
  }
}

// Slices of at least 2,048 ids, at most kGreedySplits a row: V4's vocabulary takes 32 a row.
int SliceCount(int32_t vocab) {
  return static_cast<int>(std::min<int64_t>(kGreedySplits, (vocab + 2047) / 2048));
}

// The row's first candidate (the best of its slices), on every lane of the warp.
__device__ Best WarpBest(const Best* best, int slices) {
  Best b{UINT32_MAX, INT32_MAX};
  for (int s = threadIdx.x % 32; s < slices; s += 32) b = Better(b, best[s]);
  for (int off = 16; off > 0; off /= 2) {
    const Best other{__shfl_xor_sync(0xffffffffu, b.key, off),
                     __shfl_xor_sync(0xffffffffu, b.id, off)};
    b = Better(b, other);
  }
  return b;
}

constexpr int kRunWarps = 8;

// Warp (run r of row blockIdx.y), for rows walking in id order: IdOrderTerm of each id in the
// run summed from zero in id order (run_sums), each running sum kept in within: ChunkedPrefix
// over the ids, as SampleToken forms it.
__global__ void __launch_bounds__(kRunWarps * 32)
    IdRunSumsKernel(const float* logits, int32_t vocab, const uint32_t* bitmask,
                    const int32_t* rows_of, const SampleParams* params, const Best* best,
                    int slices, double* within, double* run_sums) {
  AwaitProducers();
  const int64_t row = blockIdx.y;
  const SampleParams p = params[row];
  if (!WalksIdOrder(p.temperature, p.top_k, p.top_p, vocab)) return;
  const int32_t run = blockIdx.x * kRunWarps + threadIdx.x / 32;
  if (run * kSumChunk >= vocab) return;
  __shared__ __align__(16) double stage[kRunWarps][kRunStage];
  const MaskedRow x = MaskedRow::Of(logits, vocab, bitmask, rows_of, row);
  const double top = KeyLogit(WarpBest(best + row * slices, slices).key);
  const double inv_t = 1.0 / p.temperature;
  const double sum = WarpRunSum(
      run * kSumChunk, min(vocab, (run + 1) * kSumChunk),
      [&](int32_t i) { return IdOrderTerm(x[i], top, inv_t, p.min_p); },
      [&](int32_t i, double, double running) { within[row * vocab + i] = running; },
      stage[threadIdx.x / 32]);
  if (threadIdx.x % 32 == 0) run_sums[row * kMaxSumRuns + run] = sum;
}

// One warp a row, for rows walking in id order (and greedy ones with greedy_too): the pick,
// PickInIdOrder's (kernels/sample_pick.h) over base[run] + within[i] by a 32-way search, or
// the first candidate; its log-probability as LogprobJoinKernel forms it (logit less max +
// log(sum), the slices' exp-sums joined in order).
__global__ void __launch_bounds__(32)
    UnsortedPickKernel(const float* logits, int32_t vocab, const uint32_t* bitmask,
                       const int32_t* rows_of, const SampleParams* params, const Best* best,
                       const ExpSum* sums, int slices, const double* within, const double* run_sums,
                       bool greedy_too, int32_t* out, float* logprobs) {
  AwaitProducers();
  __shared__ double base[kMaxSumRuns + 1];
  const int64_t row = blockIdx.x;
  const SampleParams c = params[row];
  const bool greedy = IsGreedy(c.temperature, c.top_k);
  if (!(greedy ? greedy_too : WalksIdOrder(c.temperature, c.top_k, c.top_p, vocab))) return;
  const MaskedRow x = MaskedRow::Of(logits, vocab, bitmask, rows_of, row);
  int32_t pick = WarpBest(best + row * slices, slices).id;
  if (!greedy) {
    WarpRunBases(run_sums + row * kMaxSumRuns, (vocab + kSumChunk - 1) / kSumChunk, base);
    const double* w = within + row * vocab;
    auto prefix = [&](int32_t i) { return base[i / kSumChunk] + w[i]; };
    const double total = prefix(vocab - 1);
    const double at = CounterDraw(c.seed, c.stream, c.position) * total;
    pick = WarpFirstPass(0, vocab, [&](int32_t j) { return at < prefix(j); });
    if (pick >= vocab) pick = total == 0 ? 0 : vocab - 1;
  }
  if (threadIdx.x != 0) return;
  out[row] = pick;
  if (logprobs == nullptr) return;
  if (!c.logprob) {
    logprobs[row] = 0.0f;
    return;
  }
  ExpSum sum = sums[row * slices];
  for (int s = 1; s < slices; ++s) sum = Join(sum, sums[row * slices + s]);
  logprobs[row] = static_cast<float>(static_cast<double>(x[pick]) - (sum.max + log(sum.sum)));
}

}  // namespace

int GreedyRows(SamplerWorkspace& ws, const float* logits, int64_t rows, int32_t vocab,
               const uint32_t* bitmask, const SampleParams* params, const int32_t* rows_of,
               int32_t* out, float* logprobs, void* stream) {
  if (rows > ws.rows_ || vocab != ws.vocab_) return static_cast<int>(cudaErrorInvalidValue);
  if (rows == 0) return 0;
  auto s = static_cast<cudaStream_t>(stream);
  const int slices = SliceCount(vocab);
  static_assert(sizeof(Best) == 8 && sizeof(ExpSum) == 16, "SamplerWorkspace::Reserve's sizes");
  auto* best = static_cast<Best*>(ws.greedy_best_);
  auto* sums = static_cast<ExpSum*>(ws.greedy_sums_);
  LaunchKernel(GreedySliceKernel, dim3(static_cast<unsigned>(slices), static_cast<unsigned>(rows)),
               kThreads, 0, s, logits, vocab, bitmask, params, rows_of, true, best, sums);
  // Every row greedy: the pick is the first candidate, with no run sums to form.
  LaunchKernel(UnsortedPickKernel, static_cast<unsigned>(rows), 32, 0, s, logits, vocab, bitmask,
               rows_of, params, best, sums, slices, ws.prefix_, ws.run_sums_, true, out, logprobs);
  return static_cast<int>(cudaGetLastError());
}

int UnsortedPicks(SamplerWorkspace& ws, const float* logits, int64_t rows, int32_t vocab,
                  const uint32_t* bitmask, const SampleParams* params, const int32_t* rows_of,
                  bool greedy_too, int32_t* out, float* logprobs, void* stream) {
  if (rows > ws.rows_ || vocab != ws.vocab_) return static_cast<int>(cudaErrorInvalidValue);
  if (rows == 0) return 0;
  auto s = static_cast<cudaStream_t>(stream);
  const int slices = SliceCount(vocab);
  auto* best = static_cast<Best*>(ws.greedy_best_);
  auto* sums = static_cast<ExpSum*>(ws.greedy_sums_);
  LaunchKernel(GreedySliceKernel, dim3(static_cast<unsigned>(slices), static_cast<unsigned>(rows)),
               kThreads, 0, s, logits, vocab, bitmask, params, rows_of, greedy_too, best, sums);
  const int32_t runs = (vocab + kSumChunk - 1) / kSumChunk;
  // Not launched early: beside the slices' grid its blocks were packed onto a few SMs, and the
  // walk took 49 us from 4 to 16 rows against 25 at 1 (bench/RESULTS.md, "Grids launched early
  // are packed"); after the drain 26 us at 4 rows, 30 at 8.
  LaunchKernelAfterDrain(
      IdRunSumsKernel,
      dim3(static_cast<unsigned>((runs + kRunWarps - 1) / kRunWarps), static_cast<unsigned>(rows)),
      kRunWarps * 32, 0, s, logits, vocab, bitmask, rows_of, params, best, slices, ws.prefix_,
      ws.run_sums_);
  LaunchKernel(UnsortedPickKernel, static_cast<unsigned>(rows), 32, 0, s, logits, vocab, bitmask,
               rows_of, params, best, sums, slices, ws.prefix_, ws.run_sums_, greedy_too, out,
               logprobs);
  return static_cast<int>(cudaGetLastError());
}

int IdOrderRows(SamplerWorkspace& ws, const float* logits, int64_t rows, int32_t vocab,
                const uint32_t* bitmask, const SampleParams* params, const int32_t* rows_of,
                int32_t* out, float* logprobs, void* stream) {
  return UnsortedPicks(ws, logits, rows, vocab, bitmask, params, rows_of, true, out, logprobs,
                       stream);
}

}  // namespace deepinfer::kernels
