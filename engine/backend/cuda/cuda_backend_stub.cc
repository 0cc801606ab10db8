// Builds without nvcc: --device cuda is a clear error, never a silent CPU run.
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/device_forward.h"

namespace deepinfer {

Result<std::unique_ptr<Backend>> MakeCudaBackend(int) {
  return Unimplemented("this build has no CUDA support (nvcc was not found at configure time)");
}

Result<std::unique_ptr<DeviceForward>> DeviceForward::Create(const Checkpoint&,
                                                             const DeviceForwardOptions&) {
  return Unimplemented("this build has no CUDA support (nvcc was not found at configure time)");
}

}  // namespace deepinfer
