// A device slot's caches (step_rows.h's layout in the step plan's buffers), reset for a fresh
// sequence or copied from another slot: the device forward's ResetSlot and CopySlot
// (engine/model/slot_stepper.h) enqueue these on its stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/backend/cuda/device_step.h"
#include "engine/backend/cuda/device_weights.h"
#include "engine/common/status.h"

namespace deepinfer {

/// Compressor states of a fresh sequence in `slot`: kv 0, gate -inf (an empty window weighs
/// nothing). Rows need no reset: a sequence sees only the rows its own positions wrote.
Status ResetSlotCaches(const DeviceModel& model, const StepPlan& plan, int slot,
                       cudaStream_t stream);

/// Slot `to` gets what slot `from` holds after `length` tokens: its compressed rows and indexer
/// keys so far, its whole window ring (rows sit at position % ring), and the compressors'
/// partial windows. slots_total counts the spare slot (the options' slots + 1).
Status CopySlotCaches(const DeviceModel& model, const StepPlan& plan, int64_t slots_total, int from,
                      int to, int64_t length, cudaStream_t stream);

}  // namespace deepinfer
