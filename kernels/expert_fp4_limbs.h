// The routed experts of a one-row step as exact integer sums (sm_90a). The reference numerics
// round an expert's activations to e4m3 with a power-of-two scale per 128 values, so each value is
// an integer q (|q| <= 448 * 512) times 2^(e - 9); an e2m1 weight times two is an integer in
// [-12, 12]. A 32-weight block's sum of products is then an int32 sum, formed with DP4A on q split
// into three byte limbs: about two instructions a weight where the fp32 GEMV
// (kernels/expert_fp4.h) spends five. A block's integer sum is exact (|sum| < 2^27); it is
// rounded once, to fp32 (above 2^24), scaled (powers of two: exact while the product of the two
// scales stays a normal float) and added to the other blocks' in fp32.
#pragma once

#include <cstdint>

#include "kernels/expert_fp4.h"

namespace deepinfer::kernels {

/// Bytes of limbs a 32-value block takes: three planes of 32 (bits 0-7 and 8-15 unsigned, the
/// rest signed).
constexpr int64_t kLimbBlockBytes = 96;

/// Rounds x [rows, in] through e4m3 as the reference numerics do (a power-of-two scale 2^e per
/// 128 values from the block's amax and kActAmaxFloor: QdqFp8Rows' values, bit for bit; values
/// already so rounded stay as they are) and writes, per 32-value block, the integers
/// q = value * 2^(9 - e) as limbs [rows, in / 32, kLimbBlockBytes] and per 128 values the scale
/// 2^(e - 10) (the 2^-9 of q and the 1/2 of the doubled weights) as scales [rows, in / 128].
/// Needs in % 128 == 0; returns a cudaError_t value (0 on success).
int ActLimbsFp8(const float* x, int64_t rows, int64_t in, uint8_t* limbs, float* scales,
                void* stream);

/// y[g.y_row[0]] = W_e x[g.x_row[0]] for each one-row group g (as Fp4ExpertGemv; groups of other
/// sizes write nothing: the caller forms one-row groups, group_rows 1), x given as ActLimbsFp8's
/// limbs and scales. Needs in % 128 == 0. live_groups as for Fp4ExpertGemv.
int Fp4ExpertGemvLimbs(const uint8_t* const* weights, const uint8_t* const* scales, int64_t out,
                       int64_t in, const ExpertGroup* groups, int n_groups, const uint8_t* limbs,
                       const float* limb_scales, float* y, void* stream,
                       const int32_t* live_groups = nullptr);

/// The gate and up products of each one-row group and their clamped SwiGLU,
/// SwiGluF(g, u, limit), in one launch: g and u each as Fp4ExpertGemvLimbs gives them, bit for bit.
int Fp4ExpertGateUpLimbs(const uint8_t* const* w1, const uint8_t* const* s1,
                         const uint8_t* const* w3, const uint8_t* const* s3, int64_t out,
                         int64_t in, const ExpertGroup* groups, int n_groups, float limit,
                         const uint8_t* limbs, const float* limb_scales, float* y, void* stream,
                         const int32_t* live_groups = nullptr);

}  // namespace deepinfer::kernels
