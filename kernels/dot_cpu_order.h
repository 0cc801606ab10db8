// Products of weights in their stored formats summed exactly as the CPU backend sums them (each
// weight dequantised as engine/model/weights.cc's DequantizeRow does, then OrderedDot from
// kernels/exact_math.h): the device forward's CPU-order mode, in which it reproduces the CPU
// forward bit for bit so that its plumbing (caches, slots, graphs) can be checked exactly. One
// thread per output: slow, for checking. Device pointers; `stream` is a cudaStream_t as void*;
// each returns the CUDA error code (0 on success).
#pragma once

#include <cstdint>

#include "kernels/expert_fp4.h"

namespace deepinfer::kernels {

/// Stored formats these products read (engine/model/weights.h's WeightFormat subset).
enum class StoredFormat : int { kBf16 = 0, kFp8Block128 = 1, kFp4Block32 = 2 };

/// y[r * y_stride + o] = sum_i x[r * x_stride + i] * W[o, i] in the CPU's order, for o < out of
/// the [out, in] weight w: bf16; FP8 e4m3 with e8m0 128x128 scales [ceil(out/128), ceil(in/128)];
/// or FP4 e2m1 (two per byte, low nibble first) with e8m0 scales [out, in / 32]. `out_begin`
/// selects weight rows out_begin .. out_begin + out - 1 (a multiple of 128 for FP8).
int QuantizedDotCpuOrder(StoredFormat format, const uint8_t* w, const uint8_t* scale,
                         int64_t out_begin, int64_t out, int64_t in, const float* x,
                         int64_t x_stride, int64_t rows, float* y, int64_t y_stride, void* stream);

/// Fp4ExpertGemv's products (kernels/expert_fp4.h; groups below *live_groups, any row count up to
/// kExpertGroupRows) in the CPU's order.
int Fp4ExpertCpuOrder(const uint8_t* const* weights, const uint8_t* const* scales, int64_t out,
                      int64_t in, const ExpertGroup* groups, int n_groups, const float* x, float* y,
                      const int32_t* live_groups, void* stream);

}  // namespace deepinfer::kernels
