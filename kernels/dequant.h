// Dequantisers for the released weight formats, on the GPU. Plain C++ launchers: pointers are
// device pointers, `stream` is a cudaStream_t passed as void*, and the return value is the CUDA
// error code (0 on success) so no CUDA type leaks into engine headers.
#pragma once

#include <cstdint>

namespace deepinfer::kernels {

/// y[o, i] = e4m3(w[o, i]) * e8m0(scale[o / block_out, i / block_in]), fp32 out.
int DequantFp8Block(const uint8_t* w, const uint8_t* scale, int64_t out, int64_t in, int block_out,
                    int block_in, float* y, void* stream);
/// y[o, i] = e2m1(nibble i of row o) * e8m0(scale[o, i / 32]); w is [out, in / 2] bytes.
int DequantFp4Block32(const uint8_t* w, const uint8_t* scale, int64_t out, int64_t in, float* y,
                      void* stream);

}  // namespace deepinfer::kernels
