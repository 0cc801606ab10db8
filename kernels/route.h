// The MoE step's glue on the device: the router (scores, bias, top-k or hash, weights), the
// grouping of routed (token, slot) pairs by expert for the grouped expert kernels
// (kernels/expert_fp4.h), and the weighted combine. Each gives exactly what the CPU's Moe
// (engine/model/moe.cc) computes. Device pointers; `stream` is a cudaStream_t as void*; each
// returns the CUDA error code (0 on success).
#pragma once

#include <cstdint>

#include "kernels/expert_fp4.h"

namespace deepinfer::kernels {

/// engine/model/config.h's ScoringFunc, in the same order.
enum class RouterScoring : int { kSqrtSoftplus = 0, kSigmoid = 1, kSoftmax = 2 };

struct RouterParams {
  int experts = 0;  // E <= kMaxRouterExperts
  int top_k = 0;    // K <= kMaxRouterTopK
  RouterScoring scoring = RouterScoring::kSqrtSoftplus;
  bool norm_topk_prob = true;
  float routed_scaling = 1.0f;
};
constexpr int kMaxRouterExperts = 1024, kMaxRouterTopK = 16;

/// Per token t < T: experts[t * K ..] and weights[t * K ..] as RouteToken (engine/model/
/// routing.h) gives them from logits [T, E]: hash-routed when tid2eid is non-null (the row of
/// tokens[t], ids already checked by the engine), else the top-K of score + bias (bias may be
/// null), equal values by the lower expert id.
int RouteTokens(const float* logits, const float* bias, const int32_t* tid2eid,
                const int32_t* tokens, int64_t T, const RouterParams& p, int32_t* experts,
                float* weights, void* stream);

/// The one token's activations as the one-token experts take them: ActLimbsFp8(x, 1, in, limbs,
/// scales) of kernels/expert_fp4_limbs.h.
struct TokenLimbs {
  const float* x = nullptr;
  int64_t in = 0;  // a multiple of 128
  uint8_t* limbs = nullptr;
  float* scales = nullptr;
};

/// RouteTokens of one token (T = 1) and BuildExpertGroups' one-row groups of its pairs
/// (group_rows 1) in one launch: the same experts, weights, groups and count, bit for bit. With
/// `limbs` (else null) the launch also forms the token's activation limbs, ActLimbsFp8's bytes:
/// they need only the block's input, as the router does, so the experts' path is a launch shorter.
int RouteOneToken(const float* logits, const float* bias, const int32_t* tid2eid,
                  const int32_t* tokens, const RouterParams& p, int32_t* experts, float* weights,
                  ExpertGroup* up, ExpertGroup* down, int32_t* n_groups, void* stream,
                  const TokenLimbs* limbs = nullptr);

/// Most groups BuildExpertGroups can write for `pairs` pairs over E experts, group_rows a group,
/// each expert's groups padded to a multiple of `align`.
int64_t MaxExpertGroups(int64_t pairs, int experts, int group_rows, int align = 1);

/// The largest `align` BuildExpertGroups takes.
constexpr int kMaxGroupAlign = 64;

/// Groups the pairs p = t * K + k (experts [pairs]) by expert: expert ascending, each expert's
/// pairs ascending, group_rows (1..kExpertGroupRows) to a group — the expert kernel's row bound,
/// fixed per captured graph, so no routing can make a group the kernel skips. up[g] multiplies
/// token rows (x_row = p / K) into pair rows (y_row = p); down[g] maps pair rows to pair rows.
/// *n_groups (device) receives the count, at most MaxExpertGroups(pairs, E, group_rows, align);
/// the expert kernels take it as their live count, so one captured launch serves every routing.
/// Ids lie in [0, E) (the loader checks tid2eid; the router picks nothing else); a pair outside
/// gets no group.
/// With align > 1 each expert's groups are followed by empty ones (its id, 0 rows) up to a
/// multiple of align, so windows of `align` consecutive groups hold one expert each (the folded
/// GEMM's tiles then never split a window between experts).
/// rank_scratch holds `pairs` ints. One block: with RouteTokens 7 µs at batch 1, 29 µs at 256 and
/// 0.8 ms for an 8K-token chunk on the H200 (bench/RESULTS-gpu.md).
int BuildExpertGroups(const int32_t* experts, int64_t pairs, int top_k, int n_experts,
                      int group_rows, ExpertGroup* up, ExpertGroup* down, int32_t* n_groups,
                      int32_t* rank_scratch, void* stream, int align = 1);

/// out[t, c] = (sum over token t's pairs (ids in [0, E), as BuildExpertGroups groups them), expert
/// ascending, equal experts by slot, of y[t * K + k, c] * weights[t * K + k]) + shared[t, c]
/// (shared may be null), each product and sum rounded as the CPU's Moe rounds them.
int CombineExperts(const float* y, const int32_t* experts, const float* weights,
                   const float* shared, int64_t T, int K, int64_t dim, float* out, void* stream);

/// The mHC post a combine feeds (kernels/ops.h's HyperPost): n streams [T, n, dim] in, the
/// post weights [T, n] and combination [T, n, n], the new streams [T, n, dim] out.
struct HyperPostArgs {
  const float* streams = nullptr;
  const float* post = nullptr;
  const float* comb = nullptr;
  int n = 0;
  float* out = nullptr;
};

/// CombineExperts into a row h, then HyperPost(post.streams, h, post.post, post.comb, T, post.n,
/// dim, post.out), in one launch and without writing h: the same bits as the two launches.
int CombineExpertsPost(const float* y, const int32_t* experts, const float* weights,
                       const float* shared, int64_t T, int K, int64_t dim,
                       const HyperPostArgs& post, void* stream);

}  // namespace deepinfer::kernels
