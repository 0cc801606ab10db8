// V4's attention (decode steps and prompt chunks): one shared K = V row per cache entry, 64 query
// heads, a sink logit per head. Each query's rows are split over blocks (flash-decoding) and read
// once per 16 heads on CUDA cores, or, from cache rows at 64 heads, once per 32 on tensor cores
// (kernels/mqa_mma.cu); a second launch combines the splits with the sinks. The CPU-order
// SparseAttention in kernels/ops.h is the bit-exact counterpart. Device pointers; `stream` is a
// cudaStream_t as void*; returns the CUDA error code (0 on success).
#pragma once

#include <cstdint>

#include "kernels/fused_glue.h"

namespace deepinfer::kernels {

/// Floats of scratch MqaDecode needs for n_queries queries with at most max_splits splits.
int64_t MqaDecodeScratch(int64_t n_queries, int heads, int head_dim, int max_splits);

/// o[t, h] = sum_e softmax_e(scale * q[t, h] . r_e, sink_h) r_e over the rows r_e of query t
/// (head_dim floats each): entries offsets[t] .. offsets[t + 1) of either `rows` itself (rows
/// gathered per query; row_index null) or, through row_index, of a pool of rows many queries
/// share (prefill: every token of a chunk selects among the same sequence's rows, nothing is
/// copied). heads a multiple of 16, head_dim 512, q and rows 16-byte aligned. max_rows: the most
/// rows of any query.
int MqaDecode(const float* q, const float* rows, const int32_t* row_index, const int64_t* offsets,
              int64_t n_queries, int heads, int head_dim, const float* sinks, float scale,
              int64_t max_rows, int max_splits, float* scratch, float* o, void* stream);

/// The same over rows in the reference cache layout, kKvRowBytes each (kernels/kv_row.h; rows
/// 8-byte aligned), reading 584 bytes per row instead of 2,048: with 64 heads MqaMmaFp8Rows'
/// result (below), with other head counts MqaDecode's over the unpacked rows, bit for bit. With
/// out_rope (and o_fp8) the same launch then rotates o as Rope(o, n_queries, heads, 512,
/// out_rope->rope_dim, ...) (kernels/ops.h) would and writes its QdqFp8Rows round trip to o_fp8:
/// out_rope->heads == heads, rope_dim a multiple of 4.
int MqaDecodeFp8Rows(const float* q, const uint8_t* rows, const int32_t* row_index,
                     const int64_t* offsets, int64_t n_queries, int heads, int head_dim,
                     const float* sinks, float scale, int64_t max_rows, int max_splits,
                     float* scratch, float* o, void* stream, const RopeArgs* out_rope = nullptr,
                     float* o_fp8 = nullptr);

/// The cache-row form on tensor cores (kernels/mqa_mma.cu), which MqaDecodeFp8Rows takes for 64
/// heads: a block per (query, 32 heads, split of its rows) decodes each row once for its heads;
/// the query and the softmax weights enter as three bf16 parts each, so every product is exact
/// and the sums are fp32 (within 1e-6 of the CPU measured; the CUDA-core form's 1e-5 bound),
/// not bit for bit with the CUDA-core form. heads must be 64.
int MqaMmaFp8Rows(const float* q, const uint8_t* rows, const int32_t* row_index,
                  const int64_t* offsets, int64_t n_queries, int heads, int head_dim,
                  const float* sinks, float scale, int64_t max_rows, int max_splits, float* scratch,
                  float* o, void* stream, const RopeArgs* out_rope = nullptr,
                  float* o_fp8 = nullptr);

}  // namespace deepinfer::kernels
