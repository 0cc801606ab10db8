// The routed experts at prefill sizes on Hopper's warpgroup tensor cores (wgmma): MXFP4 weights
// whose four e8m0 scales in each 128-wide block fold into the operand (kernels/fp4_e4m3.h,
// docs/gpu.md "Expert GEMM"), converted to e4m3 in the wgmma's register fragments once per tile
// of 128 output rows, against FP8 activations of up to 64 tokens. Device pointers; `stream` is
// a cudaStream_t as void*; returns the CUDA error code (0 on success).
#pragma once

#include <cstdint>

#include "kernels/expert_fp4.h"

namespace deepinfer::kernels {

/// Groups per block of the folded kernel: 8 groups of up to 8 tokens, the wgmma's N of 64.
constexpr int kFoldedWindowGroups = 8;

/// What Fp4ExpertMma computes (same arguments, groups sorted by expert as BuildExpertGroups writes
/// them; each window of kFoldedWindowGroups consecutive groups shares a block, and runs of one
/// expert in it share the weight tile), for matrices whose scales fold: every 128-wide block of
/// every row of scales[e] has its four exponents within 12 of each other (ScalesFold, checked by
/// the caller when the weights load; a block that does not fold gives wrong sums, not a fault).
/// Each 128-column slice's products are exact and summed by the tensor cores in their FP8
/// accumulator (~14 significant bits: within ~1e-3 of the products' magnitudes, not fp32
/// rounding; exact where a slice's sum fits it), then scaled once by the weight's folded scale
/// and the activation's scale into an fp32 total, as DeepGEMM promotes its FP8 sums. A token's
/// sums do not depend on the tokens it shares a block with. A group of 0 rows writes nothing. in %
/// 128 == 0, x_rows % 4 == 0; xq and weights[e] 16-byte aligned, scales[e] 4-byte aligned.
/// live_groups as for Fp4ExpertGemv.
int Fp4ExpertWgmma(const uint8_t* const* weights, const uint8_t* const* scales, int64_t out,
                   int64_t in, const ExpertGroup* groups, int n_groups, const uint8_t* xq,
                   const float* x_scale, int64_t x_rows, float* y, void* stream,
                   const int32_t* live_groups = nullptr);

/// Fp4ExpertWgmma of two matrices of one shape over the same groups and activations in one
/// launch (an expert's gate and up weights into y1 and y3), each as its own launch gives it.
int Fp4ExpertWgmmaPair(const uint8_t* const* w1, const uint8_t* const* s1, float* y1,
                       const uint8_t* const* w3, const uint8_t* const* s3, float* y3, int64_t out,
                       int64_t in, const ExpertGroup* groups, int n_groups, const uint8_t* xq,
                       const float* x_scale, int64_t x_rows, void* stream,
                       const int32_t* live_groups = nullptr);

}  // namespace deepinfer::kernels
