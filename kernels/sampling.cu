#include <cuda_runtime.h>

#include <cub/device/device_radix_sort.cuh>

#include "kernels/launch.cuh"
#include "kernels/sample_nucleus.h"
#include "kernels/sample_pick.h"
#include "kernels/sample_rows.cuh"
#include "kernels/sample_topk.h"
#include "kernels/sampling.h"

namespace deepinfer::kernels {
namespace {

// A draw's masked logits as sort keys, the row in the high half and DescendingKey in the low:
// one device-wide stable sort of all rows then orders each row's candidates as the CPU does
// (a segmented sort gives a whole row to one block: 0.75 ms a row at V4's vocabulary).
__global__ void PrepareKernel(const float* logits, int64_t total, int32_t vocab,
                              const uint32_t* bitmask, const int32_t* rows_of, uint64_t* keys,
                              int32_t* ids) {
  AwaitProducers();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / vocab;
    const int32_t id = static_cast<int32_t>(i % vocab);
    const float v = MaskedRow::Of(logits, vocab, bitmask, rows_of, row)[id];
    keys[i] = (static_cast<uint64_t>(row) << 32) | DescendingKey(v);
    ids[i] = id;
  }
}

// The sorted keys' logits, for the kernels after the sort.
__global__ void UnpackKernel(const uint64_t* keys, int64_t total, float* logits) {
  AwaitProducers();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    logits[i] = KeyLogit(static_cast<uint32_t>(keys[i]));
  }
}

// Bits of the row index in a sort key: the sort looks at 32 + RowBits(rows) bits.
int RowBits(int64_t rows) {
  int bits = 0;
  while ((int64_t{1} << bits) < rows) ++bits;
  return bits;
}

// A candidate's probability exp((logit - top) / T) in double: the CPU's value for it.
__device__ __forceinline__ double CandidateProb(const float* k, int32_t i, double top,
                                                double inv_t) {
  return exp((k[i] - top) * inv_t);
}

constexpr int kRunWarps = 8;

// Warp (run r of row blockIdx.y): the run's probabilities (written to probs) and its sum from
// zero in the candidates' order (run_sums), with each running sum within the run (within) — the
// ChunkedPrefix terms, over the first n_max candidates at most (those sorted or selected). Rows
// the id-order walk draws (UnsortedPicks) are not theirs.
__global__ void __launch_bounds__(kRunWarps * 32)
    RunSumsKernel(const float* sorted_keys, int32_t vocab, int32_t n_max,
                  const SampleParams* params, double* probs, double* within, double* run_sums) {
  AwaitProducers();
  const int64_t row = blockIdx.y;
  const SampleParams p = params[row];
  if (IsGreedy(p.temperature, p.top_k) || WalksIdOrder(p.temperature, p.top_k, p.top_p, vocab)) {
    return;
  }
  const int32_t n = min(CandidateCount(p.top_k, vocab), n_max);
  const int32_t run = blockIdx.x * kRunWarps + threadIdx.x / 32;
  if (run * kSumChunk >= n) return;
  __shared__ __align__(16) double stage[kRunWarps][kRunStage];
  const float* k = sorted_keys + row * vocab;
  const double inv_t = 1.0 / p.temperature, top = k[0];
  const double sum = WarpRunSum(
      run * kSumChunk, min(n, (run + 1) * kSumChunk),
      [&](int32_t i) { return CandidateProb(k, i, top, inv_t); },
      [&](int32_t i, double term, double running) {
        probs[row * vocab + i] = term;
        within[row * vocab + i] = running;
      },
      stage[threadIdx.x / 32]);
  if (threadIdx.x % 32 == 0) run_sums[row * kMaxSumRuns + run] = sum;
}

// One warp a row: PickCandidate (sample_pick.h) on the running sums base[run] + within[i], where
// base is the sum of the whole runs before (added in order from zero by lane 0, as
// ChunkedPrefix does); the searches are 32-way instead of binary, over the same monotone values,
// so they find the same indices. Of a row's candidates the first n_max at most are at hand: where
// the kept ones run on past them, the top-p cut is TopPCutWithin's against the row's total in
// another order (the parts of SumNucleusParts, NucleusRows), and a row it leaves undecided gets
// -1.
__global__ void __launch_bounds__(32)
    PickKernel(const int32_t* sorted_ids, const float* sorted_keys, const double* probs,
               const double* within, const double* run_sums, const double* nucleus_parts,
               int32_t vocab, int32_t n_max, const SampleParams* params, int32_t* out,
               float* picked_keys) {
  AwaitProducers();
  __shared__ double base[kMaxSumRuns + 1];
  const int64_t row = blockIdx.x;
  const SampleParams c = params[row];
  if (WalksIdOrder(c.temperature, c.top_k, c.top_p, vocab)) return;  // UnsortedPicks' row
  const int32_t* ids = sorted_ids + row * vocab;
  const int lane = threadIdx.x;
  if (IsGreedy(c.temperature, c.top_k)) {
    if (lane == 0) {
      out[row] = ids[0];  // the largest logit, lowest id among equals
      picked_keys[row] = sorted_keys[row * vocab];
    }
    return;
  }
  const int32_t n_all = CandidateCount(c.top_k, vocab), n = min(n_all, n_max);
  WarpRunBases(run_sums + row * kMaxSumRuns, (n + kSumChunk - 1) / kSumChunk, base);
  const double* p = probs + row * vocab;
  const double* w = within + row * vocab;
  auto prefix = [&](int32_t i) { return base[i / kSumChunk] + w[i]; };
  int32_t keep = n;
  if (c.min_p > 0) {  // the terms below the floor are a suffix; the first always stays
    const double floor = c.min_p * p[0];
    keep = WarpFirstPass(1, n, [&](int32_t i) { return p[i] < floor; });
  }
  double sum = prefix(keep - 1);
  if (keep == n && n < n_all) {  // the kept candidates' sorted total is not at hand
    int32_t cut = -1;
    if (nucleus_parts && TriesNucleusAmongSelected(c.temperature, c.top_k, c.top_p, vocab)) {
      // The slices' parts joined by a butterfly: every lane forms the same sums (a + b == b + a).
      double total =
          lane < NucleusParts(vocab) ? nucleus_parts[row * kNucleusPartsMax + lane] : 0.0;
      for (int off = 16; off > 0; off /= 2) total += __shfl_xor_sync(0xffffffffu, total, off);
      double lo_share, hi_share;
      TopPShareBounds(total, SumOrderSlack(vocab), c.top_p, &lo_share, &hi_share);
      const int32_t lo = WarpFirstPass(0, n, [&](int32_t j) { return prefix(j) >= lo_share; });
      const int32_t hi = WarpFirstPass(0, n, [&](int32_t j) { return prefix(j) >= hi_share; });
      if (lo == hi && hi < n) cut = hi;
    }
    if (cut < 0) {
      if (lane == 0) out[row] = -1;
      return;
    }
    keep = cut + 1;
    sum = prefix(cut);
  } else if (c.top_p < 1.0f) {
    const double x = c.top_p * sum;
    const int32_t i = WarpFirstPass(0, keep, [&](int32_t j) { return prefix(j) >= x; });
    if (i < keep) {
      keep = i + 1;
      sum = prefix(i);
    }
  }
  const double x = CounterDraw(c.seed, c.stream, c.position) * sum;
  int32_t pick = WarpFirstPass(0, keep, [&](int32_t j) { return x < prefix(j); });
  if (pick >= keep) pick = keep - 1;
  if (lane == 0) {
    out[row] = ids[pick];
    picked_keys[row] = sorted_keys[row * vocab + pick];  // its masked logit, for the log-prob
  }
}

constexpr int kLogprobThreads = 256;
constexpr int kLogprobSlices = 32;

// Block (slice, row): the slice's sum of exp(logit - max) in double over the row's masked logits
// (masked tokens add nothing; max: the first sorted candidate), in a block reduction's order.
__global__ void __launch_bounds__(kLogprobThreads)
    LogprobSliceKernel(const float* logits, int32_t vocab, const uint32_t* bitmask,
                       const int32_t* rows_of, const float* sorted_keys, const SampleParams* params,
                       double* parts) {
  AwaitProducers();
  __shared__ double partial[kLogprobThreads / 32];
  const int64_t row = blockIdx.y;
  const SampleParams& c = params[row];
  if (!c.logprob || WalksIdOrder(c.temperature, c.top_k, c.top_p, vocab)) return;
  const MaskedRow x = MaskedRow::Of(logits, vocab, bitmask, rows_of, row);
  const float mx = sorted_keys[row * vocab];
  // Masked ids (-inf) add exp(-inf) = +0, which changes no sum.
  const double sum = BlockSliceSum<kLogprobThreads>(
      vocab, [&](int32_t i) { return exp(static_cast<double>(x[i]) - mx); }, partial);
  if (threadIdx.x == 0) parts[row * kLogprobSlices + blockIdx.x] = sum;
}

// Row r: the picked token's log-probability, as ComputeLogprobs takes it: its logit less
// max + log(sum), the slices' sums added in order (0 for rows that do not ask).
__global__ void LogprobJoinKernel(const float* sorted_keys, int32_t vocab,
                                  const SampleParams* params, const double* parts,
                                  const float* picked_keys, const int32_t* out, float* logprobs,
                                  int64_t rows) {
  AwaitProducers();
  const int64_t row = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (row >= rows) return;
  const SampleParams& c = params[row];
  if (WalksIdOrder(c.temperature, c.top_k, c.top_p, vocab)) return;  // UnsortedPicks' row
  if (!c.logprob || out[row] < 0) {
    logprobs[row] = 0.0f;  // not asked (0, as the engine reports it), or not drawn here
    return;
  }
  double sum = 0;
  for (int s = 0; s < kLogprobSlices; ++s) sum += parts[row * kLogprobSlices + s];
  const double log_z = sorted_keys[row * vocab] + log(sum);
  logprobs[row] = static_cast<float>(static_cast<double>(picked_keys[row]) - log_z);
}

}  // namespace

SamplerWorkspace::~SamplerWorkspace() {
  for (void* p :
       {static_cast<void*>(sorted_keys_), static_cast<void*>(ids_), static_cast<void*>(sorted_ids_),
        static_cast<void*>(probs_), static_cast<void*>(prefix_), static_cast<void*>(picked_keys_),
        static_cast<void*>(run_sums_), static_cast<void*>(logprob_parts_), temp_, greedy_best_,
        greedy_sums_, static_cast<void*>(nucleus_parts_)}) {
    if (p) cudaFree(p);
  }
}

int SamplerWorkspace::Reserve(int64_t rows, int32_t vocab) {
  if (rows < 1 || vocab < 1 || rows * vocab > INT32_MAX ||
      vocab > int64_t{kSumChunk} * kMaxSumRuns) {
    return static_cast<int>(cudaErrorInvalidValue);  // CUB's item count is 32-bit
  }
  const int64_t total = rows * vocab;
  cudaError_t e = cudaSuccess;
  auto take = [&](auto** p, size_t bytes) {
    if (e == cudaSuccess) e = cudaMalloc(reinterpret_cast<void**>(p), bytes);
  };
  take(&sorted_keys_, total * sizeof(float));
  take(&ids_, total * sizeof(int32_t));
  take(&sorted_ids_, total * sizeof(int32_t));
  take(&probs_, total * sizeof(double));
  take(&prefix_, total * sizeof(double));
  take(&picked_keys_, rows * sizeof(float));
  take(&run_sums_, rows * kMaxSumRuns * sizeof(double));
  take(&logprob_parts_, rows * kLogprobSlices * sizeof(double));
  take(&greedy_best_, rows * kGreedySplits * 8);
  take(&greedy_sums_, rows * kGreedySplits * 16);
  take(&nucleus_parts_, rows * kNucleusPartsMax * sizeof(double));
  if (e != cudaSuccess) return static_cast<int>(e);
  // The sort's keys go through probs_ and prefix_ (8 bytes an element), free until after it.
  e = cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes_, reinterpret_cast<uint64_t*>(probs_),
                                      reinterpret_cast<uint64_t*>(prefix_), ids_, sorted_ids_,
                                      static_cast<int>(total), 0, 32 + RowBits(rows));
  if (e != cudaSuccess) return static_cast<int>(e);
  take(&temp_, temp_bytes_);
  if (e != cudaSuccess) return static_cast<int>(e);
  rows_ = rows;
  vocab_ = vocab;
  return static_cast<int>(cudaDeviceSynchronize());
}

// The pick from each row's sorted candidates (sorted_keys_, sorted_ids_; at most n_max a row
// read): run sums, the draw, and the log-probabilities where asked. nucleus_parts: NucleusRows'
// totals by slice (SumNucleusParts; else null).
struct SamplerAccess {
  static int PickSorted(SamplerWorkspace& ws, const float* logits, int64_t rows, int32_t vocab,
                        const uint32_t* bitmask, const int32_t* rows_of, const SampleParams* params,
                        int32_t n_max, const double* nucleus_parts, int32_t* out, float* logprobs,
                        cudaStream_t s) {
    const int32_t run_blocks = ((n_max + kSumChunk - 1) / kSumChunk + kRunWarps - 1) / kRunWarps;
    // Launched early beside the unpacking, the run sums' blocks are packed onto a few SMs; up to
    // 8 rows they take longer so than the drain costs (bench/RESULTS.md, "Grids launched early
    // are packed": top-p at 8 rows 151.6 -> 143.2 us), from 16 rows the drain costs more.
    LaunchKernelOverlapping(rows > 8, RunSumsKernel,
                            dim3(static_cast<unsigned>(run_blocks), static_cast<unsigned>(rows)),
                            kRunWarps * 32, 0, s, ws.sorted_keys_, vocab, n_max, params, ws.probs_,
                            ws.prefix_, ws.run_sums_);
    LaunchKernel(PickKernel, static_cast<unsigned>(rows), 32, 0, s, ws.sorted_ids_, ws.sorted_keys_,
                 ws.probs_, ws.prefix_, ws.run_sums_, nucleus_parts, vocab, n_max, params, out,
                 ws.picked_keys_);
    if (logprobs) {
      LaunchKernel(LogprobSliceKernel, dim3(kLogprobSlices, static_cast<unsigned>(rows)),
                   kLogprobThreads, 0, s, logits, vocab, bitmask, rows_of, ws.sorted_keys_, params,
                   ws.logprob_parts_);
      LaunchKernel(LogprobJoinKernel, static_cast<unsigned>((rows + 127) / 128), 128, 0, s,
                   ws.sorted_keys_, vocab, params, ws.logprob_parts_, ws.picked_keys_, out,
                   logprobs, rows);
    }
    return static_cast<int>(cudaGetLastError());
  }

  // TopKRows and NucleusRows: each row's first kTopKMax candidates selected, then the pick among
  // them; between the two, with `walks` the id walk's rows drawn (after the select is done with
  // prefix_, which their sums take), with `nucleus` the nucleus rows' totals summed.
  static int SelectAndPick(SamplerWorkspace& ws, const float* logits, int64_t rows, int32_t vocab,
                           const uint32_t* bitmask, const SampleParams* params,
                           const int32_t* rows_of, bool nucleus, bool walks, int32_t* out,
                           float* logprobs, void* stream) {
    if (rows > ws.rows_ || vocab != ws.vocab_ || vocab < kTopKMax) {
      return static_cast<int>(cudaErrorInvalidValue);
    }
    if (rows == 0) return 0;
    auto s = static_cast<cudaStream_t>(stream);
    // The tiles' candidates go through probs_ and prefix_, free until the pick.
    int e = SelectTopKCandidates(
        logits, rows, vocab, bitmask, rows_of, reinterpret_cast<uint64_t*>(ws.probs_),
        reinterpret_cast<uint64_t*>(ws.prefix_), ws.sorted_keys_, ws.sorted_ids_, s);
    if (e != 0) return e;
    if (walks) {
      e = UnsortedPicks(ws, logits, rows, vocab, bitmask, params, rows_of, false, out, logprobs, s);
      if (e != 0) return e;
    }
    if (nucleus) {
      e = SumNucleusParts(logits, rows, vocab, bitmask, rows_of, params, ws.sorted_keys_,
                          ws.nucleus_parts_, s);
      if (e != 0) return e;
    }
    return PickSorted(ws, logits, rows, vocab, bitmask, rows_of, params, kTopKMax,
                      nucleus ? ws.nucleus_parts_ : nullptr, out, logprobs, s);
  }
};

int SortedRows(SamplerWorkspace& ws, const float* logits, int64_t rows, int32_t vocab,
               const uint32_t* bitmask, const SampleParams* params, const int32_t* rows_of,
               int32_t* out, float* logprobs, void* stream) {
  if (rows > ws.rows_ || vocab != ws.vocab_) return static_cast<int>(cudaErrorInvalidValue);
  if (rows == 0) return 0;
  auto s = static_cast<cudaStream_t>(stream);
  const int64_t total = rows * vocab;
  auto* keys = reinterpret_cast<uint64_t*>(ws.probs_);
  auto* sorted_keys = reinterpret_cast<uint64_t*>(ws.prefix_);
  LaunchKernel(PrepareKernel, 1024, 256, 0, s, logits, total, vocab, bitmask, rows_of, keys,
               ws.ids_);
  size_t temp_bytes = ws.temp_bytes_;
  const cudaError_t e = cub::DeviceRadixSort::SortPairs(
      ws.temp_, temp_bytes, keys, sorted_keys, ws.ids_, ws.sorted_ids_, static_cast<int>(total), 0,
      32 + RowBits(rows), s);
  if (e != cudaSuccess) return static_cast<int>(e);
  LaunchKernel(UnpackKernel, 1024, 256, 0, s, sorted_keys, total, ws.sorted_keys_);
  return SamplerAccess::PickSorted(ws, logits, rows, vocab, bitmask, rows_of, params, vocab,
                                   nullptr, out, logprobs, s);
}

int SampleRows(SamplerWorkspace& ws, const float* logits, int64_t rows, int32_t vocab,
               const uint32_t* bitmask, const SampleParams* params, const int32_t* rows_of,
               int32_t* out, float* logprobs, void* stream) {
  if (rows > ws.rows_ || vocab != ws.vocab_) return static_cast<int>(cudaErrorInvalidValue);
  if (rows == 0) return 0;
  // The rows the id-order walk draws first: their sums go through prefix_, which the sort then
  // takes over.
  if (const int e = UnsortedPicks(ws, logits, rows, vocab, bitmask, params, rows_of, false, out,
                                  logprobs, stream);
      e != 0) {
    return e;
  }
  return SortedRows(ws, logits, rows, vocab, bitmask, params, rows_of, out, logprobs, stream);
}

int TopKRows(SamplerWorkspace& ws, const float* logits, int64_t rows, int32_t vocab,
             const uint32_t* bitmask, const SampleParams* params, const int32_t* rows_of,
             int32_t* out, float* logprobs, void* stream) {
  return SamplerAccess::SelectAndPick(ws, logits, rows, vocab, bitmask, params, rows_of, false,
                                      false, out, logprobs, stream);
}

int NucleusRows(SamplerWorkspace& ws, const float* logits, int64_t rows, int32_t vocab,
                const uint32_t* bitmask, const SampleParams* params, const int32_t* rows_of,
                int32_t* out, float* logprobs, void* stream) {
  return SamplerAccess::SelectAndPick(ws, logits, rows, vocab, bitmask, params, rows_of, true, true,
                                      out, logprobs, stream);
}

int NucleusRowsWithoutWalks(SamplerWorkspace& ws, const float* logits, int64_t rows, int32_t vocab,
                            const uint32_t* bitmask, const SampleParams* params,
                            const int32_t* rows_of, int32_t* out, float* logprobs, void* stream) {
  return SamplerAccess::SelectAndPick(ws, logits, rows, vocab, bitmask, params, rows_of, true,
                                      false, out, logprobs, stream);
}

}  // namespace deepinfer::kernels
