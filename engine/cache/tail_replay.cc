#include "engine/cache/tail_replay.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace deepinfer {

namespace {

// Drops what a partial compressor state holds: an empty window, as at the start of a sequence.
void DropPartial(CompressorState& st) {
  std::fill(st.kv.begin(), st.kv.end(), 0.0f);
  std::fill(st.gate.begin(), st.gate.end(), -INFINITY);
}

}  // namespace

Result<SequenceState> ResumeByTailReplay(Model& model, const SequenceState& exact,
                                         std::span<const int32_t> context, int64_t tail) {
  const int64_t p = exact.length;
  if (p != static_cast<int64_t>(context.size()) || p == 0) {
    return InvalidArgument("tail replay: the context must be exactly the stored sequence");
  }
  if (tail <= 0) return InvalidArgument("tail replay: tail must be positive");
  const int64_t q = std::max<int64_t>(0, p - tail);
  SequenceState state = exact;
  state.length = q;
  for (LayerCache& layer : state.layers) {
    // Poisoned, so that reading a dropped ring slot shows up as NaN instead of passing unseen.
    std::fill(layer.ring.begin(), layer.ring.end(), std::numeric_limits<float>::quiet_NaN());
    layer.ring_from = q;
    DropPartial(layer.comp);
    DropPartial(layer.index_comp);
  }
  std::vector<float> last(static_cast<size_t>(model.config().vocab_size));
  BatchItem item{&state, context.subspan(static_cast<size_t>(q)), last.data(), nullptr, true};
  DI_RETURN_IF_ERROR(model.ForwardBatch(std::span<BatchItem>(&item, 1)));
  return state;
}

}  // namespace deepinfer
