// The lightning indexer's scores for a batch of decode queries, on CUDA cores (fp32 keys) or on
// tensor cores (bf16 keys), every key read once for all heads (the CPU-order IndexerScores in
// kernels/ops.h reads keys per thread and sums in the CPU's order, for bit-exact comparisons).
// Device pointers; `stream` is a cudaStream_t as void*; returns the CUDA error code (0 on success).
#pragma once

#include <cstdint>

namespace deepinfer::kernels {

/// out[b, j] = sum_h w[b, h] * relu(q[b, h] . keys[b][j]) for j < n_keys, b < batch:
/// q [batch, heads, 128], w [batch, heads], keys of query b at keys + b * key_stride (rows of
/// 128 floats), out [batch, n_keys]. heads <= 64 and a multiple of 4; head_dim == 128; q and keys
/// 16-byte aligned, key_stride a multiple of 4 (0: one key set for every query, as in prefill).
int IndexerScoresBatch(const float* q, const float* w, int64_t batch, int heads, const float* keys,
                       int64_t key_stride, int64_t n_keys, float* out, void* stream);

/// The same scores on tensor cores with keys in bf16 (rows of 128, the device cache's form):
/// q rounded to bf16 in the kernel, products accumulated in fp32 in the mma's order, heads
/// summed in a fixed order (deterministic; agrees with the CPU to fp32 rounding, and its
/// products are exact where q and keys are bf16 values, as the reference numerics' FP4-rounded
/// ones are). heads == 64; q 8-byte aligned, keys 4-byte aligned, key_stride even (elements).
/// With key_set (device, batch entries) query b reads the keys at keys + key_set[b] * key_stride
/// instead: the device cache's key pages of the sequence the query belongs to. With key_counts
/// (device, batch entries) query b scores only keys j < key_counts[b] (its visible rows; the
/// rest of its row of `out` is left as it was), so a step's cost follows the sequences' lengths,
/// not the cache's capacity.
int IndexerScoresMma(const float* q, const float* w, int64_t batch, int heads, const uint16_t* keys,
                     int64_t key_stride, int64_t n_keys, float* out, void* stream,
                     const int32_t* key_set = nullptr, const int32_t* key_counts = nullptr);

}  // namespace deepinfer::kernels
