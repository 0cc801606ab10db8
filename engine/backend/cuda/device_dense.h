// The device step's dense products (internal to the CUDA backend's step): the GEMV up to
// kGemvMaxRows rows, the tensor-core GEMMs above, the CPU-order dots for the exact numerics, and
// several products of one input in one launch where the GEMV allows; and its plain RMSNorm.
#pragma once

#include "engine/backend/cuda/device_step.h"

namespace deepinfer {

/// Returns the CUDA error code of `expr` from the enclosing function when it is not 0.
#define DI_CUDA_TRY(expr)                 \
  do {                                    \
    if (const int _e = (expr)) return _e; \
  } while (0)

/// The GEMVs take up to 8 rows a launch.
constexpr int kGemvRows = 8;

/// y = x W^T for a dense weight (FP8 block-scaled or bf16) in the step's numerics; x_fp8: x's FP8
/// round trip where a previous kernel already made it (else null).
int Dense(const StepPlan& p, const DeviceLinear& w, const float* x, int rows, float* y, void* s,
          const float* x_fp8 = nullptr);

/// Dense of the block's normed input p.buf.x, whose FP8 round trip HyperPreNorm left in p.buf.xq.
int DenseOfInput(const StepPlan& p, const DeviceLinear& w, int rows, float* y, void* s);

/// DenseOfInput of two weights, ya = x A^T and yb = x B^T, in one GEMV launch when both have
/// one format and width, the step has up to kGemvMaxRows rows (the GEMV's) and the numerics are the
/// production ones; otherwise two DenseOfInput calls. Each output is bit for bit what DenseOfInput
/// gives.
int DenseOfInputPair(const StepPlan& p, const DeviceLinear& a, float* ya, const DeviceLinear& b,
                     float* yb, int rows, void* s);

/// RMSNorm of `rows` rows of `dim` values (weight null: unweighted) in the step's numerics: the
/// CPU's order with cpu_order, else the block-parallel kernel. y may alias x.
int Norm(const StepPlan& p, const float* x, const float* weight, int64_t rows, int64_t dim,
         float* y, void* s);

}  // namespace deepinfer
