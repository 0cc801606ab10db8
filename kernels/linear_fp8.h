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

}  // namespace deepinfer::kernels
