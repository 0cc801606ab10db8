// CUDA and kernel-launcher error codes as Statuses (internal to the CUDA backend's host code).
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "engine/common/status.h"
#include "kernels/gemm_fp8.h"

namespace deepinfer {

/// Ok for cudaSuccess, else Internal naming `what` and CUDA's reason.
inline Status CudaStatus(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::Ok();
  return Internal(std::string("CUDA: ") + what + ": " + cudaGetErrorString(e));
}

/// A launcher's return code: a CUDA error code; the FP8 GEMM's also cuBLAS statuses (1000 +
/// status) and its own negative codes (kernels/gemm_fp8.h).
inline Status KernelStatus(int e, const char* what) {
  if (e == 0) return Status::Ok();
  const std::string why =
      e >= kernels::kFp8GemmCublasError ? "cuBLAS status " + std::to_string(e - 1000)
      : e < 0 ? "bad argument, no cuBLASLt context or no algorithm (" + std::to_string(e) + ")"
              : cudaGetErrorString(static_cast<cudaError_t>(e));
  return Internal(std::string("CUDA: ") + what + " failed: " + why);
}

}  // namespace deepinfer
