// deepinfer-model logits --forward device: the tokens through the device forward
// (engine/backend/cuda/device_forward.h), a step per chunk of the logits command's chunk plan.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/common/status.h"
#include "engine/model/weights.h"

namespace deepinfer {

/// Logits [tokens.size(), vocab] of one sequence through the device forward (reference
/// numerics), chunks[k] tokens a step (they sum to tokens.size(); the largest is the forward's
/// max_chunk and max_batch). Flags: --forward device (required), --kernels
/// production|cpu-order (default production).
Result<std::vector<float>> DeviceForwardLogits(const Checkpoint& checkpoint,
                                               const std::vector<int32_t>& tokens,
                                               const std::vector<int64_t>& chunks,
                                               const std::map<std::string, std::string>& flags);

}  // namespace deepinfer
