// Rotary position embedding tables: the plain table of sliding-window layers and the YaRN table
// of layers with a compressor. V4 rotates interleaved pairs (x[2i], x[2i+1]) in the trailing
// rope_dim channels of each head.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model/config.h"

namespace deepinfer {

struct RopeTable {
  int rope_dim = 0;
  std::vector<float> inv_freq;  // rope_dim / 2 frequencies

  /// Rotates the rope_dim values at `x` for position `pos`; inverse rotates by -angle.
  void Apply(float* x, int64_t pos, bool inverse) const;
};

/// theta^(-2i/d) for i < d/2.
RopeTable MakePlainRope(int rope_dim, double theta);
/// YaRN-blended frequencies (transformers' `_compute_yarn_parameters` rule, no magnitude scaling).
RopeTable MakeYarnRope(int rope_dim, double theta, const YarnParams& yarn);
/// The table a layer uses: plain for sliding-window layers, compress (YaRN) for CSA/HCA.
RopeTable MakeLayerRope(const ModelConfig& c, AttnType type);

}  // namespace deepinfer
