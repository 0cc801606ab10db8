#include "engine/model/compressor_pool.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/exact_math.h"

namespace deepinfer {

bool CompressorPoolToken(const CompressorWeights& w, CompressorState& st, const float* kv,
                         const float* gate, int64_t pos, float* pooled,
                         std::vector<float>& scratch) {
  const int m = w.ratio, width = w.width, proj = st.proj;
  const int cur = w.overlap ? m : 0;  // first row of the current window in the state
  const int slot = static_cast<int>(pos % m);
  float* kv_row = &st.kv[static_cast<size_t>(cur + slot) * proj];
  float* gate_row = &st.gate[static_cast<size_t>(cur + slot) * proj];
  std::memcpy(kv_row, kv, proj * sizeof(float));
  for (int c = 0; c < proj; ++c) gate_row[c] = gate[c] + w.ape[slot * proj + c];
  if ((pos + 1) % m != 0) return false;

  const int slots = w.overlap ? 2 * m : m;
  scratch.resize(slots);
  float* weights = scratch.data();
  for (int c = 0; c < width; ++c) {
    float mx = -INFINITY;
    for (int s = 0; s < slots; ++s) {
      const int col = (w.overlap && s >= m) ? width + c : c;
      weights[s] = st.gate[static_cast<size_t>(s) * proj + col];
      mx = std::max(mx, weights[s]);
    }
    float denom = 0, acc = 0;
    for (int s = 0; s < slots; ++s) denom += (weights[s] = ExpF(weights[s] - mx));
    for (int s = 0; s < slots; ++s) {
      const int col = (w.overlap && s >= m) ? width + c : c;
      acc += weights[s] / denom * st.kv[static_cast<size_t>(s) * proj + col];
    }
    pooled[c] = acc;
  }
  if (w.overlap) {
    std::copy(st.kv.begin() + static_cast<size_t>(m) * proj, st.kv.end(), st.kv.begin());
    std::copy(st.gate.begin() + static_cast<size_t>(m) * proj, st.gate.end(), st.gate.begin());
  }
  return true;
}

}  // namespace deepinfer
