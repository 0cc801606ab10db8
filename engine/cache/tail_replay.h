// Resuming a sequence from a stored prefix without its window rings and compressor partial
// states: keep the compressed rows and indexer keys, replay the last `tail` tokens to rebuild the
// rest (reference/deepseek-v4.md §4.4). With tail = 128 this is the "bounded replay" other V4
// engines use; it is approximate, because during the replay the deeper layers' windows lack the
// positions before the tail. deepinfer's prefix cache resumes from exact snapshots instead; this
// exists to measure what the approximation costs (`deepinfer-model replay-error`).
#pragma once

#include <cstdint>
#include <span>

#include "engine/common/status.h"
#include "engine/model/model.h"

namespace deepinfer {

/// From `exact`, the state after `context` (exact.length == context.size()), builds the state
/// the bounded replay produces: every compressed row and indexer key kept (the replay attends to
/// them causally and does not emit them again), rings and partial compressor states dropped, the
/// last `tail` tokens replayed. Exact when tail >= 128 + 127 * (layers - 1) (the dependency cone
/// of §4.4) or tail >= P. The MTP state is not rebuilt.
Result<SequenceState> ResumeByTailReplay(Model& model, const SequenceState& exact,
                                         std::span<const int32_t> context, int64_t tail);

}  // namespace deepinfer
