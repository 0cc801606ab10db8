// Deterministic selection used by the MoE router and the lightning indexer.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model/config.h"

namespace deepinfer {

/// Writes the indices of the k largest scores, largest first. Equal scores are ordered by the
/// lower index, so the choice never depends on sort stability, thread count or batch layout.
void TopKIndices(const float* scores, int64_t n, int64_t k, int32_t* out,
                 std::vector<int32_t>& scratch);

/// Router score of one logit (sqrt(softplus), sigmoid; softmax is normalised by the caller).
float RouterScore(ScoringFunc f, float logit);

/// Routes one token: K experts and their weights from the gate logits [E]. Hash-routed layers
/// take the experts from `hash_experts` (a tid2eid row); others take the top-K of score + bias.
/// Weights are the chosen scores, normalised to sum 1 when cfg.norm_topk_prob, times
/// cfg.routed_scaling_factor.
void RouteToken(const ModelConfig& cfg, const float* logits, const float* bias,
                const int32_t* hash_experts, int32_t* experts, float* weights,
                std::vector<float>& scratch, std::vector<int32_t>& order);

}  // namespace deepinfer
