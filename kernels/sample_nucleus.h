// The GPU sampler's nucleus totals (kernels/sample_nucleus.cu), for NucleusRows
// (kernels/sampling.h): each top-p row's probabilities summed over the whole row in a parallel
// order, a bound on their sorted total within SumOrderSlack (kernels/sample_pick.h). Device
// pointers; `stream` is a cudaStream_t as void*; returns the CUDA error code (0 on success).
#pragma once

#include <cstdint>

#include "kernels/sample_pick.h"

namespace deepinfer::kernels {

/// Slices the sampler's block reductions cut a row into (one a lane of the pick's warp), of
/// ceil(vocab / kRowSlices) ids each: the nucleus totals' and the log-probabilities'.
constexpr int kRowSlices = 32;

/// For each row r whose draw TriesNucleusAmongSelected (logits row rows_of[r], or r when null;
/// ids whose bit is clear in mask row r of bitmask at -inf), top its first candidate's logit
/// (sorted_keys[r * vocab], as the select leaves it), and each slice s:
/// - parts[r * kRowSlices + s]: the sum of IdOrderTerm over the slice;
/// - when the draw asks for its log-probability: logprob_parts[r * kRowSlices + s], the sum of
///   exp(logit - top) over the slice in the order the sorted path's log-probability sums it, so
///   its log-probability is that path's to the bit (kernels/sampling.cu, LogprobSliceKernel).
/// Other rows are left alone.
int SumNucleusParts(const float* logits, int64_t rows, int32_t vocab, const uint32_t* bitmask,
                    const int32_t* rows_of, const SampleParams* params, const float* sorted_keys,
                    double* parts, double* logprob_parts, void* stream);

}  // namespace deepinfer::kernels
