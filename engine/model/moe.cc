// V4 mixture of experts: hash routing (tid2eid) or score routing (sqrt-softplus scores, top-k
// on score + bias), normalised and scaled weights, clamped SwiGLU experts and the shared expert.
#include <algorithm>
#include <cmath>

#include "engine/model/model.h"
#include "engine/model/routing.h"

namespace deepinfer {

void Model::Ffn(const FfnWeights& f, const float* x, int64_t rows, float* out) {
  const int64_t inter = f.w1.out;
  std::vector<float> g(rows * inter), u(rows * inter), act(rows * inter);
  be_.Linear(f.w1, x, rows, g.data(), QuantizeActs(f.w1));
  be_.Linear(f.w3, x, rows, u.data(), QuantizeActs(f.w3));
  be_.SwiGlu(g.data(), u.data(), rows * inter, static_cast<float>(cfg_.swiglu_limit), act.data());
  be_.Linear(f.w2, act.data(), rows, out, QuantizeActs(f.w2));
}

void Model::Moe(const LayerWeights& L, const float* u, const int32_t* tokens, int64_t T,
                float* out) {
  const MoeWeights& m = L.ffn;
  const int E = cfg_.n_routed_experts, K = cfg_.num_experts_per_tok;
  const int64_t d = cfg_.hidden_size;
  std::vector<float> logits(T * E);
  be_.Linear(m.gate, u, T, logits.data(), QuantizeActs(m.gate));

  // Routing: per token K (expert, weight) pairs.
  std::vector<int32_t> expert(T * K), order;
  std::vector<float> weight(T * K), scratch;
  for (int64_t t = 0; t < T; ++t) {
    const int32_t* hash = L.hash_routed ? &m.tid2eid[static_cast<size_t>(tokens[t]) * K] : nullptr;
    RouteToken(cfg_, &logits[t * E], m.gate_bias.empty() ? nullptr : m.gate_bias.data(), hash,
               &expert[t * K], &weight[t * K], scratch, order);
  }

  // Experts in index order, each over the tokens routed to it.
  std::fill(out, out + T * d, 0.0f);
  std::vector<int64_t> rows;
  std::vector<float> row_w, xs, ys;
  for (int e = 0; e < E; ++e) {
    rows.clear();
    row_w.clear();
    for (int64_t t = 0; t < T; ++t) {
      for (int k = 0; k < K; ++k) {
        if (expert[t * K + k] == e) {
          rows.push_back(t);
          row_w.push_back(weight[t * K + k]);
        }
      }
    }
    if (rows.empty()) continue;
    const int64_t n = static_cast<int64_t>(rows.size());
    xs.resize(n * d);
    ys.resize(n * d);
    for (int64_t i = 0; i < n; ++i) std::copy_n(u + rows[i] * d, d, &xs[i * d]);
    Ffn(m.experts[e], xs.data(), n, ys.data());
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t c = 0; c < d; ++c) out[rows[i] * d + c] += ys[i * d + c] * row_w[i];
    }
  }
  if (m.has_shared) {
    ys.resize(T * d);
    Ffn(m.shared, u, T, ys.data());
    for (int64_t i = 0; i < T * d; ++i) out[i] += ys[i];
  }
}

}  // namespace deepinfer
