// SumNucleusParts (kernels/sample_nucleus.h): a top-p row's terms summed over the whole row, a
// block a slice, for NucleusRows' cut among the selected candidates. Any order will do: the
// sorted total is only bounded by this one (SumOrderSlack), so it need not be the walks' chunked
// order, and a block reduction over 32 slices a row takes 28 µs at 64 rows of V4's vocabulary
// where the id walk's runs took 86 (bench/RESULTS.md, "Top-p draws among the selected").
#include <cuda_runtime.h>

#include "kernels/launch.cuh"
#include "kernels/sample_nucleus.h"
#include "kernels/sample_rows.cuh"

namespace deepinfer::kernels {
namespace {

constexpr int kThreads = 256;

// Block (slice, row): the slice's sum of IdOrderTerm (exp((logit - top) / T) in double, 0 below
// the min-p floor) in a block reduction's order.
__global__ void __launch_bounds__(kThreads)
    NucleusPartsKernel(const float* logits, int32_t vocab, const uint32_t* bitmask,
                       const int32_t* rows_of, const SampleParams* params, const float* sorted_keys,
                       double* parts) {
  AwaitProducers();
  __shared__ double partial[kThreads / 32];
  const int64_t row = blockIdx.y;
  const SampleParams c = params[row];
  if (!TriesNucleusAmongSelected(c.temperature, c.top_k, c.top_p, vocab)) return;
  const MaskedRow x = MaskedRow::Of(logits, vocab, bitmask, rows_of, row);
  const double top = sorted_keys[row * vocab], inv_t = 1.0 / c.temperature;
  const double sum = BlockSliceSum<kThreads>(
      vocab, [&](int32_t i) { return IdOrderTerm(x[i], top, inv_t, c.min_p); }, partial);
  if (threadIdx.x == 0) parts[row * kNucleusPartsMax + blockIdx.x] = sum;
}

}  // namespace

int SumNucleusParts(const float* logits, int64_t rows, int32_t vocab, const uint32_t* bitmask,
                    const int32_t* rows_of, const SampleParams* params, const float* sorted_keys,
                    double* parts, void* stream) {
  if (rows == 0) return 0;
  LaunchKernel(NucleusPartsKernel,
               dim3(static_cast<unsigned>(NucleusParts(vocab)), static_cast<unsigned>(rows)),
               kThreads, 0, static_cast<cudaStream_t>(stream), logits, vocab, bitmask, rows_of,
               params, sorted_keys, parts);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace deepinfer::kernels
