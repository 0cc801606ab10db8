// Small steps of the device forward that sit between the products (engine/backend/cuda/
// device_forward.h): the embedding and row gathers, the reference numerics' FP8 rounding of
// activations,
// the indexer's Hadamard + FP4 rounding of queries and keys, and fills. Each computes what the
// CPU forward computes, bit for bit (engine/model/quant.h). Device pointers; `stream` is a
// cudaStream_t as void*; each returns the CUDA error code (0 on success).
#pragma once

#include <cstdint>

#include "kernels/fused_glue.h"

namespace deepinfer::kernels {

/// out[t, c, :] = table[tokens[t], :] as fp32 for c < copies (the mHC streams start as copies of
/// the embedding): table [vocab, dim] bf16, ids already checked by the engine.
int EmbedRows(const uint16_t* table, const int32_t* tokens, int64_t n, int64_t dim, int copies,
              float* out, void* stream);

/// y = x rounded through FP8 e4m3 in blocks of 128 along each row with a power-of-two scale per
/// block, as QdqFp8Blocks(row, dim, 128, 1e-4f): the activations of an FP8 product in the
/// reference numerics. y may alias x.
int QdqFp8Rows(const float* x, int64_t rows, int64_t dim, float* y, void* stream);

/// The reference numerics' rounding of an indexer query head or key: the normalised Hadamard
/// transform, then FP4 e2m1 QDQ in blocks of 32 (HadamardTransform and QdqFp4Blocks, in that
/// order). Row r of x [rows, dim] goes to row dest[r] (r when dest is null; nowhere when
/// negative) of out_f32 and/or of out_bf16 (either may be null; the rounded values are exact in
/// bf16). dim a power of two in [32, 128]; out_f32 may be x (in place, dest null). With `rope`
/// (else null) each row is first rotated as Rope(x, rows / rope->heads, rope->heads, dim,
/// rope->rope_dim, ...) (kernels/ops.h) rotates it: the indexer query's RoPE in the same launch.
int HadamardFp4Rows(const float* x, int64_t rows, int dim, const int32_t* dest, float* out_f32,
                    uint16_t* out_bf16, void* stream, const RopeArgs* rope = nullptr);

/// y[i, :] = x[rows[i], :] for i < n (x [*, width] fp32): the rows whose logits a step returns.
int GatherRows(const float* x, int64_t width, const int32_t* rows, int64_t n, float* y,
               void* stream);

/// x[i] = value for i < n.
int SetFloats(float* x, int64_t n, float value, void* stream);
/// x[i] *= factor for i < n (one rounding, as the CPU's `v *= scale`).
int ScaleFloats(float* x, int64_t n, float factor, void* stream);

}  // namespace deepinfer::kernels
