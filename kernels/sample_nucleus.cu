// SumNucleusParts (kernels/sample_nucleus.h): a top-p row's terms summed over the whole row, a
// block a slice, for NucleusRows' cut among the selected candidates. Any order will do: the
// sorted total is only bounded by this one (SumOrderSlack), so it need not be the walks' chunked
// order, and a block reduction over 32 slices a row takes 28 µs at 64 rows of V4's vocabulary
// where the id walk's runs took 86 (bench/RESULTS.md, "Top-p draws among the selected"). The
// same pass sums the log-probability's exponentials, which the sorted path reads the row again
// for.
#include <cuda_runtime.h>

#include "kernels/launch.cuh"
#include "kernels/sample_nucleus.h"
#include "kernels/sample_rows.cuh"

namespace deepinfer::kernels {
namespace {

constexpr int kThreads = 256;

// A block's sum of its threads' v: each warp's by shuffles down, then the warps' in order on
// thread 0 (the only thread whose result counts) — LogprobSliceKernel's order.
__device__ double BlockSum(double v, double* partial) {
  for (int off = 16; off > 0; off /= 2) v += __shfl_down_sync(0xffffffffu, v, off);
  __syncthreads();  // partial may still be read from a previous sum
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  double sum = 0;
  if (threadIdx.x == 0) {
    for (int w = 0; w < kThreads / 32; ++w) sum += partial[w];
  }
  return sum;
}

// Block (slice, row): the slice's sum of IdOrderTerm (exp((logit - top) / T) in double, 0 below
// the min-p floor) and, where asked, of exp(logit - top), each in a block reduction's order.
__global__ void __launch_bounds__(kThreads)
    NucleusPartsKernel(const float* logits, int32_t vocab, const uint32_t* bitmask,
                       const int32_t* rows_of, const SampleParams* params, const float* sorted_keys,
                       double* parts, double* logprob_parts) {
  AwaitProducers();
  __shared__ double partial[kThreads / 32];
  const int64_t row = blockIdx.y;
  const SampleParams c = params[row];
  if (!TriesNucleusAmongSelected(c.temperature, c.top_k, c.top_p, vocab)) return;
  const MaskedRow x = MaskedRow::Of(logits, vocab, bitmask, rows_of, row);
  const float mx = sorted_keys[row * vocab];
  const double top = mx, inv_t = 1.0 / c.temperature;
  const bool logprob = logprob_parts != nullptr && c.logprob != 0;
  const int32_t slice = (vocab + kRowSlices - 1) / kRowSlices;
  const int32_t end = min(vocab, static_cast<int32_t>(blockIdx.x + 1) * slice);
  double sum = 0, exp_sum = 0;
  for (int32_t i = blockIdx.x * slice + threadIdx.x; i < end; i += kThreads) {
    const float v = x[i];
    sum += IdOrderTerm(v, top, inv_t, c.min_p);
    if (logprob) exp_sum += exp(static_cast<double>(v) - mx);
  }
  sum = BlockSum(sum, partial);
  if (logprob) exp_sum = BlockSum(exp_sum, partial);
  if (threadIdx.x != 0) return;
  parts[row * kRowSlices + blockIdx.x] = sum;
  if (logprob) logprob_parts[row * kRowSlices + blockIdx.x] = exp_sum;
}

}  // namespace

int SumNucleusParts(const float* logits, int64_t rows, int32_t vocab, const uint32_t* bitmask,
                    const int32_t* rows_of, const SampleParams* params, const float* sorted_keys,
                    double* parts, double* logprob_parts, void* stream) {
  if (rows == 0) return 0;
  LaunchKernel(NucleusPartsKernel, dim3(kRowSlices, static_cast<unsigned>(rows)), kThreads, 0,
               static_cast<cudaStream_t>(stream), logits, vocab, bitmask, rows_of, params,
               sorted_keys, parts, logprob_parts);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace deepinfer::kernels
