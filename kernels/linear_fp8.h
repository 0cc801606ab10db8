// y[r, o] = sum_i x[r, i] * W[o, i] for an FP8 e4m3 weight with e8m0 128x128 block scales — the
// decode-time GEMV of the released dense weights, dequantised in registers (no bf16 copy of the
// weight ever exists). Device pointers; `stream` is a cudaStream_t as void*; returns the CUDA
// error code (0 on success).
#pragma once

#include <cstdint>

namespace deepinfer::kernels {

/// rows <= 8 (decode batches; larger batches belong to a tensor-core GEMM).
int Fp8BlockGemv(const uint8_t* w, const uint8_t* scale, int64_t out, int64_t in, const float* x,
                 int rows, float* y, void* stream);
/// `groups` products in one launch (V4's grouped output projection): group g multiplies the rows
/// at x + g * x_group_stride (x_row_stride floats apart) by weight rows [g * out, (g + 1) * out)
/// of w into the rows at y + g * y_group_stride (y_row_stride apart). For wo_a on attention output
/// [rows, 8 * 4096]: x_group_stride 4096, x_row_stride 32768, y_group_stride 1024, y_row_stride
/// 8192. out % 128 == 0 when groups > 1.
int Fp8BlockGemvGrouped(const uint8_t* w, const uint8_t* scale, int groups, int64_t out, int64_t in,
                        const float* x, int64_t x_group_stride, int64_t x_row_stride, int rows,
                        float* y, int64_t y_group_stride, int64_t y_row_stride, void* stream);

/// Products of one activation batch by several FP8 weights of the same width, in one launch
/// where the shapes allow (in % 512 == 0 and 16-byte aligned weights and x; else each product
/// launched as Fp8BlockGemv would launch it): each product's y [rows, out] is bit for bit what
/// Fp8BlockGemv gives for it alone. Saves a launch per extra product at decode (wq_a with wkv, the
/// shared expert's w1 with w3).
constexpr int kMaxGemvProducts = 4;
struct Fp8GemvProduct {
  const uint8_t* w;
  const uint8_t* scale;
  int64_t out;
  float* y;
};
/// n in 1..kMaxGemvProducts, rows <= 8.
int Fp8BlockGemvMulti(const Fp8GemvProduct* products, int n, int64_t in, const float* x, int rows,
                      void* stream);

}  // namespace deepinfer::kernels
