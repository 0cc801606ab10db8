// The FP8 decode products on the tensor cores (sm_90a): y[r, o] = sum_i x[r, i] * W[o, i] for up
// to 8 activation rows, W FP8 e4m3 with e8m0 128x128 block scales (the released dense weights, as
// Fp8BlockGemv takes them), x in e4m3 with a power-of-two scale per 128 values (QuantizeActFp8's
// layout, kernels/gemm_fp8.h: the reference numerics' rounding). One mma.sync m16n8k32 takes 16
// weight rows by 32 columns against every row of the step at once, so the weights are read once
// for all 8 rows; the CUDA-core GEMV (kernels/linear_fp8.h) converts and multiplies each weight
// once per row. Each mma's 32-product sum (the tensor core's, with ~14 bits: the products are
// exact, their sum is not fp32) starts from zero and is added in fp32, per 128 columns, before
// the two block scales (powers of two) apply; so a row's sums do not depend on the other rows of
// the step, and no sum runs longer than 32 products at the tensor core's precision.
#pragma once

#include <cstdint>

namespace deepinfer::kernels {

/// xq [>= rows, in] e4m3 bytes (row stride `in`), x_scale[b * x_ld + r] the scale of row r's
/// values [128 b, 128 b + 128). Needs in % 128 == 0, 1 <= rows <= 8, w and xq 16-byte aligned;
/// returns a cudaError_t value (0 on success).
int Fp8MmaGemv(const uint8_t* w, const uint8_t* scale, int64_t out, int64_t in, const uint8_t* xq,
               const float* x_scale, int64_t x_ld, int rows, float* y, void* stream);

}  // namespace deepinfer::kernels
