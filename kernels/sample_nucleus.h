// The GPU sampler's nucleus totals (kernels/sample_nucleus.cu), for NucleusRows
// (kernels/sampling.h): each top-p row's probabilities summed over the whole row in a parallel
// order, a bound on their sorted total within SumOrderSlack (kernels/sample_pick.h). Device
// pointers; `stream` is a cudaStream_t as void*; returns the CUDA error code (0 on success).
#pragma once

#include <cstdint>

#include "kernels/sample_pick.h"

namespace deepinfer::kernels {

/// Parts a row's total is summed in (slices of at least 2,048 ids, at most 32: one a lane of the
/// pick's warp); parts[row * kNucleusPartsMax ..] holds them.
constexpr int kNucleusPartsMax = 32;
DI_HOST_DEVICE inline int NucleusParts(int32_t vocab) {
  const int64_t parts = (int64_t{vocab} + 2047) / 2048;
  return parts < kNucleusPartsMax ? static_cast<int>(parts) : kNucleusPartsMax;
}

/// For each row r whose draw TriesNucleusAmongSelected (logits row rows_of[r], or r when null;
/// ids whose bit is clear in mask row r of bitmask at -inf): parts[r * kNucleusPartsMax + s], for
/// s < NucleusParts(vocab), the sum of IdOrderTerm over slice s of the row, top its first
/// candidate's logit (sorted_keys[r * vocab], as the select leaves it). Other rows are left alone.
int SumNucleusParts(const float* logits, int64_t rows, int32_t vocab, const uint32_t* bitmask,
                    const int32_t* rows_of, const SampleParams* params, const float* sorted_keys,
                    double* parts, void* stream);

}  // namespace deepinfer::kernels
