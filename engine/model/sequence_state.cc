#include "engine/model/sequence_state.h"

#include <cmath>

namespace deepinfer {

void CompressorState::Init(const CompressorWeights& w) {
  ratio = w.ratio;
  overlap = w.overlap;
  proj = overlap ? 2 * w.width : w.width;
  const size_t n = static_cast<size_t>((overlap ? 2 : 1) * ratio) * proj;
  kv.assign(n, 0.0f);
  // An empty previous window must get softmax weight zero.
  gate.assign(n, -INFINITY);
}

size_t LayerCache::bytes() const {
  const size_t floats = ring.size() + comp.kv.size() + comp.gate.size() + index_comp.kv.size() +
                        index_comp.gate.size();
  return floats * sizeof(float) + rows.bytes() + index_keys.bytes();
}

size_t SequenceState::bytes() const {
  size_t b = mtp.bytes();
  for (const auto& l : layers) b += l.bytes();
  return b;
}

}  // namespace deepinfer
