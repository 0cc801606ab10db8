// Builds without nvcc: --device cuda is a clear error, never a silent CPU run.
#include "engine/backend/cuda/cuda_backend.h"

namespace deepinfer {

Result<std::unique_ptr<Backend>> MakeCudaBackend(int) {
  return Unimplemented("this build has no CUDA support (nvcc was not found at configure time)");
}

}  // namespace deepinfer
