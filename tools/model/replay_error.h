// deepinfer-model replay-error: what the approximate 128-token resume costs against the exact
// one (reference/deepseek-v4.md §4.4; engine/cache/tail_replay.h).
#pragma once

#include <map>
#include <string>

#include "engine/common/status.h"

namespace deepinfer {

/// Options: --model DIR, --context N (multiple of 128), --decode K, --tail T, --seed S,
/// --numerics exact|reference, --threads N. Prints one JSON line per resume point.
Status ReplayError(const std::map<std::string, std::string>& args);

}  // namespace deepinfer
