#include "kernels/cuda_available.h"

#if defined(DEEPINFER_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace deepinfer {

#if defined(DEEPINFER_HAVE_CUDA)
bool CudaBuildEnabled() { return true; }
int CudaDeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}
#else
bool CudaBuildEnabled() { return false; }
int CudaDeviceCount() { return 0; }
#endif

}  // namespace deepinfer
