// Concurrent branches of a device step (StepBranches in device_step.h; internal to the CUDA
// backend's step): which stream and plan a side branch runs on, and the event edges that fork
// and join the streams.
#pragma once

#include "engine/backend/cuda/device_step.h"
#include "engine/backend/cuda/device_weights.h"
#include "engine/common/status.h"

namespace deepinfer {

/// What a plan's StepBranches point to, owned: two side streams, four events and the side
/// plans. Destroy it only after the main stream has drained: every side stream's work joins it.
class BranchResources {
 public:
  BranchResources() = default;
  BranchResources(const BranchResources&) = delete;
  BranchResources& operator=(const BranchResources&) = delete;
  ~BranchResources();
  /// Creates the streams and events, copies *plan (complete by now: nothing may change it
  /// afterwards) into the side plans with FP8 scratch of their own from `mem`
  /// (AllocSideBuffers), and points plan->branches at all of it.
  Status SetUp(StepPlan* plan, int max_batch, DeviceMemory& mem);
  /// Waits for the side streams' work: after a failed eager step, which may stop between a fork
  /// and its join.
  void Synchronize();

 private:
  StepPlan plans_[2];
  void* streams_[2] = {};  // cudaStream_t
  void* events_[4] = {};   // cudaEvent_t
};

/// Side branch k's plan and stream in a step, or the main ones where the step does not branch.
struct Branch {
  const StepPlan& plan;
  void* stream;  // cudaStream_t
  bool forked;
};

/// Side branch k (0 or 1) of a step of `rows` rows on `main_stream`: forked only with branches
/// set up, the production kernels and at most kGemvMaxRows rows.
Branch SideBranch(const StepPlan& p, int k, int rows, void* main_stream);

/// Makes `to`'s later launches follow everything launched on `from` so far, through `event`.
/// Returns a CUDA error code.
int Follow(void* to, void* from, void* event);

}  // namespace deepinfer
