// Deterministic top-k over rows of scores on the device: the lightning indexer's selection of
// compressed rows (and any other top-k the step needs), the same indices in the same order as
// the CPU's TopKIndices (engine/model/routing.h). Device pointers; `stream` is a cudaStream_t as
// void*; returns the CUDA error code (0 on success).
#pragma once

#include <cstdint>

namespace deepinfer::kernels {

/// The largest k this kernel selects (V4's index_topk is 512 for Flash, 1024 for Pro).
constexpr int kMaxTopK = 2048;

/// For each row r < rows, with n_r = counts ? min(counts[r], n) : n scores at
/// scores + r * stride: idx[r * k + j] for j < min(k, n_r) is the index of the j-th largest score,
/// equal scores ordered by the lower index (-0 equals +0); the remaining slots get -1. counts is
/// a device array so a captured graph replays while the visible counts grow. NaN scores are not
/// supported. 1 <= k <= kMaxTopK. workspace: RowTopKWorkspace(rows, n, k) bytes of device memory
/// (may be null when that is 0).
int RowTopK(const float* scores, int64_t rows, int64_t stride, const int32_t* counts, int64_t n,
            int k, int32_t* idx, void* workspace, void* stream);

/// The workspace RowTopK needs: few long rows (decode's indexer) are split over several blocks
/// per row, whose candidates a second pass merges; otherwise 0.
size_t RowTopKWorkspace(int64_t rows, int64_t n, int k);

}  // namespace deepinfer::kernels
