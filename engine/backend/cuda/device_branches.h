// Concurrent branches of a device step (StepBranches in device_step.h; internal to the CUDA
// backend's step): which stream and plan a side branch runs on, and the event edges that fork
// and join the streams.
#pragma once

#include "engine/backend/cuda/device_step.h"

namespace deepinfer {

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
