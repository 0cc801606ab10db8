// A layer's attention block on the device (internal to the CUDA backend's step): the query and
// the window's KV row, the compressors, the indexer's selection (CSA), attention over the
// window and the compressed rows, and the grouped low-rank output projection.
#pragma once

#include "engine/backend/cuda/device_step.h"

namespace deepinfer {

/// Layer L's attention of the step's rows from the normed input p.buf.x (and its FP8 round trip
/// p.buf.xq) into p.buf.y, advancing `cache`. With StepBranches the compressors and the indexer
/// run beside the query path. Returns a CUDA error code.
int AttentionBlock(const StepPlan& p, const DeviceLayer& L, const DeviceLayerCache& cache, int rows,
                   void* s);

}  // namespace deepinfer
