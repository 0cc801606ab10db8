#include "engine/backend/cuda/device_branches.h"

#include <cuda_runtime_api.h>

#include "engine/backend/cuda/cuda_status.h"

namespace deepinfer {

BranchResources::~BranchResources() {
  for (void* e : events_) {
    if (e) cudaEventDestroy(static_cast<cudaEvent_t>(e));
  }
  for (void* s : streams_) {
    if (s) cudaStreamDestroy(static_cast<cudaStream_t>(s));
  }
}

Status BranchResources::SetUp(StepPlan* plan, int max_batch, DeviceMemory& mem) {
  for (int k = 0; k < 2; ++k) {
    cudaStream_t s = nullptr;
    DI_RETURN_IF_ERROR(
        CudaStatus(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "side stream"));
    streams_[k] = plan->branches.streams[k] = s;
  }
  for (int k = 0; k < 4; ++k) {
    cudaEvent_t e = nullptr;
    DI_RETURN_IF_ERROR(
        CudaStatus(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "branch event"));
    events_[k] = plan->branches.events[k] = e;
  }
  for (int k = 0; k < 2; ++k) {
    plans_[k] = *plan;
    DI_RETURN_IF_ERROR(AllocSideBuffers(*plan, max_batch, mem, &plans_[k].buf));
  }
  for (int k = 0; k < 2; ++k) plan->branches.plans[k] = &plans_[k];
  return Status::Ok();
}

void BranchResources::Synchronize() {
  for (void* s : streams_) {
    if (s) cudaStreamSynchronize(static_cast<cudaStream_t>(s));
  }
}

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
