// Parallel RMSNorm and mHC collapse for the production (stage 2) forward: block-wide fp32
// reductions in the GPU's own order, so results agree with the CPU backend to fp32 rounding
// (~1e-6 relative), not bit for bit — kernels/ops.h has the CPU-order versions the reference
// comparisons use. Device pointers; `stream` is a cudaStream_t as void*; CUDA error code returned.
#pragma once

#include <cstdint>

#include "kernels/ops.h"

namespace deepinfer::kernels {

/// y = x / sqrt(mean(x^2) + eps) * weight per row (weight may be null); y may alias x.
int RmsNormFast(const float* x, const float* weight, int64_t rows, int64_t dim, float eps, float* y,
                void* stream);

/// Slices each mHC reduction is split into (HyperPreFast's scratch).
constexpr int kHyperSlices = 16;

/// HyperPre's math (kernels/ops.h) in two launches: the (2 + n) * n mixing dots and the sum of
/// squares of every row spread over blocks, then Sinkhorn and the collapse, a cluster of blocks
/// per row (kernels/hyper_collapse.h). `scratch` holds rows * ((2 + n) * n + 1) * kHyperSlices
/// floats. n <= 6, rows <= 65,535. With `normed` (else null) the second
/// launch also writes normed = RmsNorm(collapsed, norm_eps) * norm_weight (null: unweighted), the
/// block's input norm, and with `normed_fp8` that row's FP8 round trip, as QdqFp8Rows
/// (kernels/forward_glue.h) would round it (normed_fp8 needs normed).
int HyperPreFast(HyperWeights w, const float* streams, int64_t rows, int n, int64_t dim,
                 float norm_eps, float hc_eps, int sinkhorn_iters, float* post, float* comb,
                 float* collapsed, float* scratch, void* stream, const float* norm_weight = nullptr,
                 float* normed = nullptr, float* normed_fp8 = nullptr);

/// HyperHead's math (kernels/ops.h) the same way, with the final norm fused as above. `scratch`
/// holds rows * (n + 1) * kHyperSlices floats.
int HyperHeadFast(HyperWeights w, const float* streams, int64_t rows, int n, int64_t dim,
                  float norm_eps, float hc_eps, float* collapsed, float* scratch, void* stream,
                  const float* norm_weight = nullptr, float* normed = nullptr,
                  float* normed_fp8 = nullptr);

}  // namespace deepinfer::kernels
