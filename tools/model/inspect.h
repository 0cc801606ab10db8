// deepinfer-model inspect: a checkpoint's configuration, tensors by dtype, parameter count, and
// whether its MXFP4 experts' scales fold per 128 columns (kernels/fp4_e4m3.h).
#pragma once

#include <map>
#include <string>

#include "engine/common/status.h"

namespace deepinfer {

/// Prints what `deepinfer-model inspect --model DIR` shows (flags: --model, required).
Status Inspect(const std::map<std::string, std::string>& flags);

}  // namespace deepinfer
