// Whether this build carries the CUDA kernels, and whether a CUDA device can be used now.
#pragma once

#include <string>

namespace deepinfer {

/// True when the project was configured with nvcc (kernels built for sm_90a).
bool CudaBuildEnabled();
/// Number of visible CUDA devices; 0 without CUDA support or without a device.
int CudaDeviceCount();

}  // namespace deepinfer
