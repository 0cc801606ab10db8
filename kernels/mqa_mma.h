// The split pass of V4's attention on tensor cores (kernels/mqa_mma.cu), for the launcher in
// kernels/mqa_decode.cu: it writes the same partials as the CUDA-core split kernel, which the
// combine there turns into the output. Device pointers; `stream` is a cudaStream_t as void*.
#pragma once

#include <cstdint>

namespace deepinfer::kernels {

/// The heads and head width the tensor-core form takes (V4-Flash's attention), and the blocks a
/// query's heads take (each split of its rows has that many).
constexpr int kMqaMmaHeads = 64, kMqaMmaDim = 512, kMqaMmaHeadBlocks = 2;
/// Rows a block takes at a time (a split of fewer rows wastes the rest of a tile).
constexpr int kMqaMmaTile = 32;

/// For each query t (n_queries) and split s (splits): over the split's share of the query's rows
/// (entries offsets[t] .. offsets[t + 1) of the 584-byte `rows`, through row_index when it is not
/// null), per head h the running maximum m of scale * q[t, h] . row, the sum l of exp(logit - m)
/// and the unnormalised output sum exp(logit - m) row, written to
/// partial + ((t * splits + s) * 64 + h) * 514 as {m, l, output[512]} (m = -inf, l = 0 and a zero
/// output for an empty split). Splits cut the rows as the CUDA-core kernel does. q 16-byte
/// aligned, rows 8-byte aligned, partial 8-byte aligned; splits at least 1. Returns the CUDA error
/// code (cudaErrorInvalidValue for misaligned pointers, splits < 1 or too many queries).
int LaunchMqaMmaSplits(const float* q, const uint8_t* rows, const int32_t* row_index,
                       const int64_t* offsets, int64_t n_queries, float scale, int splits,
                       float* partial, void* stream);

}  // namespace deepinfer::kernels
