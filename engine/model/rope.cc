#include "engine/model/rope.h"

#include <algorithm>
#include <cmath>

namespace deepinfer {

void RopeTable::Apply(float* x, int64_t pos, bool inverse) const {
  const float p = static_cast<float>(pos);
  for (int i = 0; i < rope_dim / 2; ++i) {
    // Angles are formed in fp32 like the reference, then cos/sin are evaluated exactly.
    const float angle = p * inv_freq[i];
    const float c = static_cast<float>(std::cos(static_cast<double>(angle)));
    float s = static_cast<float>(std::sin(static_cast<double>(angle)));
    if (inverse) s = -s;
    const float a = x[2 * i], b = x[2 * i + 1];
    x[2 * i] = a * c - b * s;
    x[2 * i + 1] = b * c + a * s;
  }
}

RopeTable MakePlainRope(int rope_dim, double theta) {
  RopeTable t;
  t.rope_dim = rope_dim;
  for (int i = 0; i < rope_dim / 2; ++i) {
    const float expo = static_cast<float>(2 * i) / static_cast<float>(rope_dim);
    t.inv_freq.push_back(1.0f / std::pow(static_cast<float>(theta), expo));
  }
  return t;
}

RopeTable MakeYarnRope(int rope_dim, double theta, const YarnParams& y) {
  RopeTable t = MakePlainRope(rope_dim, theta);
  if (!y.enabled) return t;
  const double dim = rope_dim;
  auto correction_dim = [&](double rotations) {
    return dim * std::log(y.original_max_position / (rotations * 2.0 * M_PI)) /
           (2.0 * std::log(theta));
  };
  double low = std::max(std::floor(correction_dim(y.beta_fast)), 0.0);
  double high = std::min(std::ceil(correction_dim(y.beta_slow)), dim - 1);
  if (low == high) high += 0.001;
  for (int i = 0; i < rope_dim / 2; ++i) {
    const float ramp = std::clamp(static_cast<float>((i - low) / (high - low)), 0.0f, 1.0f);
    const float extrapolation = t.inv_freq[i];
    const float interpolation = extrapolation / static_cast<float>(y.factor);
    const float keep = 1.0f - ramp;  // weight of the unscaled frequency
    t.inv_freq[i] = interpolation * (1.0f - keep) + extrapolation * keep;
  }
  return t;
}

RopeTable MakeLayerRope(const ModelConfig& c, AttnType type) {
  if (type == AttnType::kSliding) return MakePlainRope(c.rope_dim, c.rope_theta);
  return MakeYarnRope(c.rope_dim, c.compress_rope_theta, c.yarn);
}

}  // namespace deepinfer
