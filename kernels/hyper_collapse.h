// The second launch of HyperPreFast / HyperHeadFast (kernels/norm_fast.h): pre, post and the
// Sinkhorn combination from the summed dots, the collapse of the streams with pre, and the fused
// RMSNorm and FP8 round trip of the collapsed row. Device pointers; `stream` is a cudaStream_t.
#pragma once

#include <cstdint>

#include "kernels/ops.h"

namespace deepinfer::kernels {

/// `dots` holds rows * (kMix + 1) * kHyperSlices slices (kMix = (2 + n) * n, or n for the head),
/// as HyperPreFast's first launch leaves them. Each row is spread over a cluster of blocks that
/// meet once, through distributed shared memory, to add the row's sum of squares in a fixed
/// order; so one row fills eight SMs instead of one. head: the HC head's form (n weights, no
/// post or combination). n in [1, 6]. Returns a CUDA error code.
int HyperCollapse(int n, bool head, HyperWeights w, const float* streams, const float* dots,
                  int64_t rows, int64_t dim, float norm_eps, float hc_eps, int sinkhorn_iters,
                  float* post, float* comb, float* collapsed, const float* norm_weight,
                  float* normed, float* normed_fp8, void* stream);

}  // namespace deepinfer::kernels
