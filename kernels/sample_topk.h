// The GPU sampler's top-k candidates without a full sort (kernels/sample_topk.cu), for steps
// whose draws all keep at most kTopKMax candidates (SampleParams::top_k): the first kTopKMax of
// each row in the full sort's order, which is all that the pick reads of such a row. Device
// pointers; `stream` is a cudaStream_t as void*; returns the CUDA error code (0 on success).
#pragma once

#include <cstdint>

namespace deepinfer::kernels {

/// Candidates the top-k path keeps a row: draws with top_k up to this take it.
constexpr int kTopKMax = 128;

/// For each row r (logits row rows_of[r], or r when null; masked ids as -inf, -0 as +0): the
/// first min(kTopKMax, vocab) candidates by descending logit, ties by lower id, into
/// sorted_keys[r * vocab ..] (their logits) and sorted_ids[r * vocab ..]. The scratch arrays
/// hold rows * ceil(vocab / 4096) * kTopKMax keys each.
int SelectTopKCandidates(const float* logits, int64_t rows, int32_t vocab, const uint32_t* bitmask,
                         const int32_t* rows_of, uint64_t* scratch_a, uint64_t* scratch_b,
                         float* sorted_keys, int32_t* sorted_ids, void* stream);

}  // namespace deepinfer::kernels
