#include <cuda_runtime.h>

#include <cub/device/device_radix_sort.cuh>

#include "kernels/launch.cuh"
#include "kernels/sample_pick.h"
#include "kernels/sampling.h"

namespace deepinfer::kernels {
namespace {

// A masked logit as the low half of its sort key: descending float order as ascending integers
// (-0 as +0: the CPU's comparison ties them), the row in the high half. One device-wide stable
// sort of all rows then orders each row's candidates by descending logit, ties by lower id — a
// segmented sort gives a whole row to one block (0.75 ms a row at V4's vocabulary).
__device__ __forceinline__ uint64_t SortKey(int64_t row, float v) {
  const uint32_t u = __float_as_uint(v + 0.0f);
  const uint32_t ascending = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  return (static_cast<uint64_t>(row) << 32) | ~ascending;
}
__device__ __forceinline__ float KeyLogit(uint64_t key) {
  const uint32_t ascending = ~static_cast<uint32_t>(key);
  return __uint_as_float((ascending & 0x80000000u) ? (ascending & 0x7fffffffu) : ~ascending);
}

// The masked logits as sort keys and their ids.
__global__ void PrepareKernel(const float* logits, int64_t total, int32_t vocab,
                              const uint32_t* bitmask, const int32_t* rows_of, uint64_t* keys,
                              int32_t* ids) {
  AwaitProducers();
  const int64_t words = (vocab + 31) / 32;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / vocab;
    const int32_t id = static_cast<int32_t>(i % vocab);
    const int64_t src = rows_of ? static_cast<int64_t>(rows_of[row]) * vocab + id : i;
    float v = logits[src];
    if (bitmask && !((bitmask[row * words + id / 32] >> (id % 32)) & 1u)) v = -INFINITY;
    keys[i] = SortKey(row, v);
    ids[i] = id;
  }
}

// The sorted keys' logits, for the kernels after the sort.
__global__ void UnpackKernel(const uint64_t* keys, int64_t total, float* logits) {
  AwaitProducers();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    logits[i] = KeyLogit(keys[i]);
  }
}

// Bits of the row index in a sort key: the sort looks at 32 + RowBits(rows) bits.
int RowBits(int64_t rows) {
  int bits = 0;
  while ((int64_t{1} << bits) < rows) ++bits;
  return bits;
}

// Block r: every candidate's probability exp((logit - top) / T) in double, in parallel (each
// value is what the CPU computes for it).
__global__ void ProbsKernel(const float* sorted_keys, int32_t vocab, const SampleParams* params,
                            double* probs) {
  AwaitProducers();
  const int64_t row = blockIdx.x;
  const SampleParams p = params[row];
  if (IsGreedy(p.temperature, p.top_k)) return;
  const int32_t n = CandidateCount(p.top_k, vocab);
  const float* k = sorted_keys + row * vocab;
  const double inv_t = 1.0 / p.temperature, top = k[0];
  for (int32_t i = threadIdx.x; i < n; i += blockDim.x)
    probs[row * vocab + i] = exp((k[i] - top) * inv_t);
}

constexpr int kPickThreads = 256;

// Block r: PickCandidate (sample_pick.h) on row r's probabilities, with the running sums in
// ChunkedPrefix's order: each thread adds its runs' terms from zero, thread 0 adds the runs'
// sums in order (each run's base), then each thread writes its runs' running sums on top of
// their bases — the host's additions, each one, in parallel over the runs.
__global__ void __launch_bounds__(kPickThreads)
    PickKernel(const int32_t* sorted_ids, const float* sorted_keys, const double* probs,
               double* prefixes, int32_t vocab, const SampleParams* params, int32_t* out,
               float* picked_keys) {
  AwaitProducers();
  __shared__ double bases[kMaxSumRuns];
  const int64_t row = blockIdx.x;
  const SampleParams c = params[row];
  const int32_t* ids = sorted_ids + row * vocab;
  if (IsGreedy(c.temperature, c.top_k)) {
    if (threadIdx.x == 0) {
      out[row] = ids[0];  // the largest logit, lowest id among equals
      picked_keys[row] = sorted_keys[row * vocab];
    }
    return;
  }
  const int32_t n = CandidateCount(c.top_k, vocab);
  const int32_t runs = (n + kSumChunk - 1) / kSumChunk;
  const double* p = probs + row * vocab;
  double* prefix = prefixes + row * vocab;
  for (int32_t r = threadIdx.x; r < runs; r += blockDim.x) {
    const int32_t end = min(n, (r + 1) * kSumChunk);
    double within = 0;
    for (int32_t i = r * kSumChunk; i < end; ++i) within += p[i];
    bases[r] = within;  // the run's sum, until thread 0 turns it into its base
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double base = 0;
    for (int32_t r = 0; r < runs; ++r) {
      const double run_sum = bases[r];
      bases[r] = base;
      base += run_sum;
    }
  }
  __syncthreads();
  for (int32_t r = threadIdx.x; r < runs; r += blockDim.x) {
    const int32_t end = min(n, (r + 1) * kSumChunk);
    const double base = bases[r];
    double within = 0;
    for (int32_t i = r * kSumChunk; i < end; ++i) {
      within += p[i];
      prefix[i] = base + within;
    }
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  const double u = CounterDraw(c.seed, c.stream, c.position);
  const int32_t pick = PickCandidate(p, prefix, n, c.min_p, c.top_p, u);
  out[row] = ids[pick];
  picked_keys[row] = sorted_keys[row * vocab + pick];  // its masked logit, for LogprobKernel
}

// Block r: the picked token's log-probability, as ComputeLogprobs takes it: its logit less
// max + log(sum of exp(logit - max)) over the masked row (the sorted keys: max first, masked
// tokens -inf, which add nothing), the sum in double, in a block reduction's order.
__global__ void __launch_bounds__(kPickThreads)
    LogprobKernel(const float* sorted_keys, int32_t vocab, const SampleParams* params,
                  const float* picked_keys, float* logprobs) {
  AwaitProducers();
  __shared__ double partial[kPickThreads / 32];
  const int64_t row = blockIdx.x;
  if (!params[row].logprob) {
    if (threadIdx.x == 0) logprobs[row] = 0.0f;  // not asked: 0, as the engine reports it
    return;
  }
  const float* k = sorted_keys + row * vocab;
  const float mx = k[0];
  double sum = 0;
  for (int32_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    sum += exp(static_cast<double>(k[i]) - mx);
  }
  for (int off = 16; off > 0; off /= 2) sum += __shfl_down_sync(0xffffffffu, sum, off);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x != 0) return;
  sum = 0;
  for (int w = 0; w < kPickThreads / 32; ++w) sum += partial[w];
  const double log_z = mx + log(sum);
  logprobs[row] = static_cast<float>(static_cast<double>(picked_keys[row]) - log_z);
}

}  // namespace

SamplerWorkspace::~SamplerWorkspace() {
  for (void* p :
       {static_cast<void*>(sorted_keys_), static_cast<void*>(ids_), static_cast<void*>(sorted_ids_),
        static_cast<void*>(probs_), static_cast<void*>(prefix_), static_cast<void*>(picked_keys_),
        temp_, greedy_best_, greedy_sums_}) {
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
  take(&greedy_best_, rows * kGreedySplits * 8);
  take(&greedy_sums_, rows * kGreedySplits * 16);
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

int SampleRows(SamplerWorkspace& ws, const float* logits, int64_t rows, int32_t vocab,
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
  LaunchKernel(ProbsKernel, static_cast<unsigned>(rows), 256, 0, s, ws.sorted_keys_, vocab, params,
               ws.probs_);
  LaunchKernel(PickKernel, static_cast<unsigned>(rows), kPickThreads, 0, s, ws.sorted_ids_,
               ws.sorted_keys_, ws.probs_, ws.prefix_, vocab, params, out, ws.picked_keys_);
  if (logprobs) {
    LaunchKernel(LogprobKernel, static_cast<unsigned>(rows), kPickThreads, 0, s, ws.sorted_keys_,
                 vocab, params, ws.picked_keys_, logprobs);
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace deepinfer::kernels
