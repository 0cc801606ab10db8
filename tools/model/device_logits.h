// deepinfer-model logits --forward device: the tokens through the device forward
// (engine/backend/cuda/device_forward.h), one decode step per token.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/common/status.h"
#include "engine/model/weights.h"

namespace deepinfer {

/// Logits [tokens.size(), vocab] of one sequence, each token a decode step of the device forward
/// (reference numerics). Flags: --forward device (required), --kernels production|cpu-order
/// (default production).
Result<std::vector<float>> DeviceForwardLogits(const Checkpoint& checkpoint,
                                               const std::vector<int32_t>& tokens,
                                               const std::map<std::string, std::string>& flags);

}  // namespace deepinfer
