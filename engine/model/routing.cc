#include "engine/model/routing.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/exact_math.h"

namespace deepinfer {

void TopKIndices(const float* scores, int64_t n, int64_t k, int32_t* out,
                 std::vector<int32_t>& scratch) {
  k = std::min(k, n);
  scratch.resize(n);
  std::iota(scratch.begin(), scratch.end(), 0);
  std::partial_sort(scratch.begin(), scratch.begin() + k, scratch.end(),
                    [scores](int32_t i, int32_t j) {
                      return scores[i] > scores[j] || (scores[i] == scores[j] && i < j);
                    });
  std::copy_n(scratch.begin(), k, out);
}

float RouterScore(ScoringFunc f, float logit) {
  switch (f) {
    case ScoringFunc::kSqrtSoftplus:
      return SqrtSoftplusF(logit);
    case ScoringFunc::kSigmoid:
      return SigmoidF(logit);
    case ScoringFunc::kSoftmax:
      return logit;
  }
  return logit;
}

void RouteToken(const ModelConfig& cfg, const float* logits, const float* bias,
                const int32_t* hash_experts, int32_t* experts, float* weights,
                std::vector<float>& scratch, std::vector<int32_t>& order) {
  const int E = cfg.n_routed_experts, K = cfg.num_experts_per_tok;
  scratch.resize(2 * E);
  float* scores = scratch.data();
  float* biased = scratch.data() + E;
  for (int e = 0; e < E; ++e) scores[e] = RouterScore(cfg.scoring_func, logits[e]);
  if (cfg.scoring_func == ScoringFunc::kSoftmax) {
    const float mx = *std::max_element(scores, scores + E);
    float s = 0;
    for (int e = 0; e < E; ++e) s += (scores[e] = ExpF(scores[e] - mx));
    for (int e = 0; e < E; ++e) scores[e] /= s;
  }
  if (hash_experts != nullptr) {
    std::copy_n(hash_experts, K, experts);
  } else {
    for (int e = 0; e < E; ++e) biased[e] = scores[e] + (bias ? bias[e] : 0.0f);
    TopKIndices(biased, E, K, experts, order);
  }
  float sum = 0;
  for (int k = 0; k < K; ++k) sum += (weights[k] = scores[experts[k]]);
  const float norm = cfg.norm_topk_prob ? 1.0f / (sum + 1e-20f) : 1.0f;
  for (int k = 0; k < K; ++k) weights[k] *= norm * static_cast<float>(cfg.routed_scaling_factor);
}

}  // namespace deepinfer
