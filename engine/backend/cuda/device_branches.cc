#include "engine/backend/cuda/device_branches.h"

#include <cuda_runtime_api.h>

namespace deepinfer {

Branch SideBranch(const StepPlan& p, int k, int rows, void* main_stream) {
  const StepBranches& br = p.branches;
  if (br.plans[k] == nullptr || p.cpu_order || rows > kGemvMaxRows) {
    return {p, main_stream, false};
  }
  return {*br.plans[k], br.streams[k], true};
}

int Follow(void* to, void* from, void* event) {
  auto e = static_cast<cudaEvent_t>(event);
  if (const cudaError_t rc = cudaEventRecord(e, static_cast<cudaStream_t>(from))) {
    return static_cast<int>(rc);
  }
  return static_cast<int>(cudaStreamWaitEvent(static_cast<cudaStream_t>(to), e, 0));
}

}  // namespace deepinfer
