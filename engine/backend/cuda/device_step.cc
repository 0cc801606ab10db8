#include "engine/backend/cuda/device_step.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cassert>
#include <cmath>

#include "engine/backend/cuda/device_attention.h"
#include "engine/backend/cuda/device_branches.h"
#include "engine/backend/cuda/device_dense.h"
#include "kernels/dot_cpu_order.h"
#include "kernels/expert_fp4_limbs.h"
#include "kernels/expert_fp4_wgmma.h"
#include "kernels/forward_glue.h"
#include "kernels/fused_glue.h"
#include "kernels/linear_fp8.h"
#include "kernels/norm_fast.h"
#include "kernels/ops.h"
#include "kernels/route.h"

namespace deepinfer {
namespace {

// The mHC pre-mix of `streams` into b.h, then `norm` (the block's input norm) of it into b.x and
// b.x's FP8 round trip into b.xq (what the FP8 products and experts read); the fast path does it
// all in one launch after the dots.
int HyperPreNorm(const StepPlan& p, const kernels::HyperWeights& w, const float* streams,
                 const float* norm, int rows, void* s) {
  const ModelConfig& c = *p.cfg;
  const StepBuffers& b = p.buf;
  const float eps = static_cast<float>(c.rms_norm_eps), hc_eps = static_cast<float>(c.hc_eps);
  if (p.cpu_order) {
    DI_CUDA_TRY(kernels::HyperPre(w, streams, rows, c.hc_mult, c.hidden_size, eps, hc_eps,
                                  c.hc_sinkhorn_iters, b.post, b.comb, b.h, s));
    DI_CUDA_TRY(Norm(p, b.h, norm, rows, c.hidden_size, b.x, s));
    return kernels::QdqFp8Rows(b.x, rows, c.hidden_size, b.xq, s);
  }
  return kernels::HyperPreFast(w, streams, rows, c.hc_mult, c.hidden_size, eps, hc_eps,
                               c.hc_sinkhorn_iters, b.post, b.comb, b.h, b.hc_scratch, s, norm, b.x,
                               b.xq);
}

// The HC head's collapse of b.X and the final norm, into b.x (and b.xq as above).
int HeadNorm(const StepPlan& p, int rows, void* s) {
  const ModelConfig& c = *p.cfg;
  const DeviceModel& m = *p.model;
  const StepBuffers& b = p.buf;
  const float eps = static_cast<float>(c.rms_norm_eps), hc_eps = static_cast<float>(c.hc_eps);
  if (p.cpu_order) {
    DI_CUDA_TRY(
        kernels::HyperHead(m.hc_head, b.X, rows, c.hc_mult, c.hidden_size, eps, hc_eps, b.h, s));
    DI_CUDA_TRY(Norm(p, b.h, m.norm, rows, c.hidden_size, b.x, s));
    return kernels::QdqFp8Rows(b.x, rows, c.hidden_size, b.xq, s);
  }
  return kernels::HyperHeadFast(m.hc_head, b.X, rows, c.hc_mult, c.hidden_size, eps, hc_eps, b.h,
                                b.hc_scratch, s, m.norm, b.x, b.xq);
}

// The routed experts in the CPU's order (bit-exact, slow): activations rounded through FP8 as
// the reference numerics do, fp32 sums.
int CpuOrderExperts(const StepPlan& p, const DeviceLayer& L, int rows, int capacity, void* s) {
  const ModelConfig& c = *p.cfg;
  const StepBuffers& b = p.buf;
  const int64_t d = c.hidden_size, inter = c.moe_intermediate_size;
  const int64_t pairs = int64_t{rows} * c.num_experts_per_tok;
  const float limit = static_cast<float>(c.swiglu_limit);
  DI_CUDA_TRY(kernels::Fp4ExpertCpuOrder(L.w1, L.s1, inter, d, b.up, capacity, b.xq, b.pair_g,
                                         b.n_live, s));
  DI_CUDA_TRY(kernels::Fp4ExpertCpuOrder(L.w3, L.s3, inter, d, b.up, capacity, b.xq, b.pair_u,
                                         b.n_live, s));
  DI_CUDA_TRY(kernels::SwiGlu(b.pair_g, b.pair_u, pairs * inter, limit, b.pair_act, s));
  DI_CUDA_TRY(kernels::QdqFp8Rows(b.pair_act, pairs, inter, b.pair_act, s));
  return kernels::Fp4ExpertCpuOrder(L.w2, L.s2, d, inter, b.down, capacity, b.pair_act, b.pair_out,
                                    b.n_live, s);
}

// The routed experts of a one-token step on CUDA cores: activations rounded through FP8 as the
// reference numerics do. Where the widths are whole 128-value blocks, as in every V4 model, the
// sums are exact integer sums over the activations' limbs (kernels/expert_fp4_limbs.h): 44 us a
// V4-Flash layer on the H200 against 57 for the fp32 GEMV that takes other widths, and 64 for
// the tensor-core kernel, which wins from two tokens on (bench/RESULTS-gpu.md, "Exact integer
// sums for the one-token experts"). Only for one-row steps (ExpertGroupRows is 1 only there):
// the limbs and the groups are one row's.
int OneTokenExperts(const StepPlan& p, const DeviceLayer& L, int capacity, void* s,
                    bool limbs_made) {
  const ModelConfig& c = *p.cfg;
  const StepBuffers& b = p.buf;
  const int64_t d = c.hidden_size, inter = c.moe_intermediate_size, pairs = c.num_experts_per_tok;
  const float limit = static_cast<float>(c.swiglu_limit);
  if (d % 128 == 0 && inter % 128 == 0) {
    uint8_t* const pair_limbs = b.limbs + 3 * d;
    float* const pair_scales = b.limb_scale + d / 128;
    if (!limbs_made) DI_CUDA_TRY(kernels::ActLimbsFp8(b.xq, 1, d, b.limbs, b.limb_scale, s));
    DI_CUDA_TRY(kernels::Fp4ExpertGateUpLimbs(L.w1, L.s1, L.w3, L.s3, inter, d, b.up, capacity,
                                              limit, b.limbs, b.limb_scale, b.pair_act, s,
                                              b.n_live));
    DI_CUDA_TRY(kernels::ActLimbsFp8(b.pair_act, pairs, inter, pair_limbs, pair_scales, s));
    return kernels::Fp4ExpertGemvLimbs(L.w2, L.s2, d, inter, b.down, capacity, pair_limbs,
                                       pair_scales, b.pair_out, s, b.n_live);
  }
  DI_CUDA_TRY(kernels::Fp4ExpertGateUp(L.w1, L.s1, L.w3, L.s3, inter, d, b.up, capacity, 1, limit,
                                       b.xq, b.pair_act, s, b.n_live));
  DI_CUDA_TRY(kernels::QdqFp8Rows(b.pair_act, pairs, inter, b.pair_act, s));
  return kernels::Fp4ExpertGemv(L.w2, L.s2, d, inter, b.down, capacity, 1, b.pair_act, b.pair_out,
                                s, b.n_live);
}

// The routed experts on tensor cores from two rows on (groups of up to 8 rows, windows of groups
// by the step's size): e4m3 activations with their block scales, the same values the reference
// numerics round to. Each token's sums depend on its own activations only, not on the group,
// window or batch it comes in — except with folded_experts, where steps of window 8 take the
// folded GEMM, whose sums differ from mma.sync's (so a token's then depend on its step's size).
int MmaExperts(const StepPlan& p, const DeviceLayer& L, int rows, int capacity, void* s) {
  const ModelConfig& c = *p.cfg;
  const StepBuffers& b = p.buf;
  const int64_t d = c.hidden_size, inter = c.moe_intermediate_size;
  const int64_t pairs = int64_t{rows} * c.num_experts_per_tok;
  const float limit = static_cast<float>(c.swiglu_limit);
  const int64_t rows_padded = kernels::Fp8GemmPaddedRows(rows);
  const int expert_window = kernels::ExpertMmaWindow(pairs, c.n_routed_experts);
  DI_CUDA_TRY(kernels::QuantizeActFp8(b.x, rows, d, b.act8, b.act8_scale, s));
  const bool folded = FoldedExpertWindow(p.folded_experts, pairs, c.n_routed_experts) > 1;
  if (folded) {
    DI_CUDA_TRY(kernels::Fp4ExpertWgmmaPair(L.w1, L.s1, b.pair_g, L.w3, L.s3, b.pair_u, inter, d,
                                            b.up, capacity, b.act8, b.act8_scale, rows_padded, s,
                                            b.n_live));
  } else {
    DI_CUDA_TRY(kernels::Fp4ExpertMmaPair(L.w1, L.s1, b.pair_g, L.w3, L.s3, b.pair_u, inter, d,
                                          b.up, capacity, b.act8, b.act8_scale, rows_padded, s,
                                          b.n_live, expert_window));
  }
  DI_CUDA_TRY(kernels::SwiGlu(b.pair_g, b.pair_u, pairs * inter, limit, b.pair_act, s));
  DI_CUDA_TRY(kernels::QuantizeActFp8(b.pair_act, pairs, inter, b.pair8, b.pair8_scale, s));
  if (folded) {
    return kernels::Fp4ExpertWgmma(L.w2, L.s2, d, inter, b.down, capacity, b.pair8, b.pair8_scale,
                                   kernels::Fp8GemmPaddedRows(pairs), b.pair_out, s, b.n_live);
  }
  return kernels::Fp4ExpertMma(L.w2, L.s2, d, inter, b.down, capacity, b.pair8, b.pair8_scale,
                               kernels::Fp8GemmPaddedRows(pairs), b.pair_out, s, b.n_live,
                               expert_window);
}

// The MoE block of the normed input b.x, then the mHC post of `streams` with its output into
// `out_streams` (one launch with the combine on the production path).
int MoeBlock(const StepPlan& p, const DeviceLayer& L, int rows, const float* streams,
             float* out_streams, void* s) {
  const ModelConfig& c = *p.cfg;
  const StepBuffers& b = p.buf;
  const int E = c.n_routed_experts, K = c.num_experts_per_tok;
  const int64_t d = c.hidden_size, pairs = int64_t{rows} * K;
  const float limit = static_cast<float>(c.swiglu_limit);
  // The shared expert on side branch 0 (StepBranches) while this stream routes and runs the
  // routed experts.
  const Branch side = SideBranch(p, 0, rows, s);
  if (L.has_shared) {
    if (side.forked) DI_CUDA_TRY(Follow(side.stream, s, p.branches.events[0]));
    const StepBuffers& sb = side.plan.buf;
    DI_CUDA_TRY(
        DenseOfInputPair(side.plan, L.shared_w1, b.sg, L.shared_w3, b.su, rows, side.stream));
    if (p.cpu_order) {
      DI_CUDA_TRY(kernels::SwiGlu(b.sg, b.su, rows * L.shared_w1.out, limit, b.sa, s));
      DI_CUDA_TRY(Dense(p, L.shared_w2, b.sa, rows, b.hs, s));
    } else {  // SwiGLU and w2's FP8 input in one launch
      DI_CUDA_TRY(
          kernels::SwiGluQdq(b.sg, b.su, rows, L.shared_w1.out, limit, b.sa, sb.act, side.stream));
      DI_CUDA_TRY(Dense(side.plan, L.shared_w2, b.sa, rows, b.hs, side.stream, sb.act));
    }
  }
  DI_CUDA_TRY(DenseOfInput(p, L.gate, rows, b.gate_logits, s));
  kernels::RouterParams rp;
  rp.experts = E;
  rp.top_k = K;
  rp.scoring = static_cast<kernels::RouterScoring>(static_cast<int>(c.scoring_func));
  rp.norm_topk_prob = c.norm_topk_prob;
  rp.routed_scaling = static_cast<float>(c.routed_scaling_factor);
  const int group_rows = ExpertGroupRows(rows);
  const int align = FoldedExpertWindow(p.folded_experts, pairs, E);
  const int capacity = static_cast<int>(kernels::MaxExpertGroups(pairs, E, group_rows, align));
  // The one-token experts' activation limbs in the router's launch too (their exact integer
  // form, OneTokenExperts).
  const bool limbs_in_router = rows == 1 && !p.cpu_order && d % 128 == 0 &&
                               c.moe_intermediate_size % 128 == 0 && group_rows == 1;
  if (rows == 1) {  // the groups in the router's launch
    const kernels::TokenLimbs limbs{b.xq, d, b.limbs, b.limb_scale};
    DI_CUDA_TRY(kernels::RouteOneToken(b.gate_logits, L.gate_bias, L.tid2eid, p.in.tokens, rp,
                                       b.route_e, b.route_w, b.up, b.down, b.n_live, s,
                                       limbs_in_router ? &limbs : nullptr));
  } else {
    DI_CUDA_TRY(kernels::RouteTokens(b.gate_logits, L.gate_bias, L.tid2eid, p.in.tokens, rows, rp,
                                     b.route_e, b.route_w, s));
    DI_CUDA_TRY(kernels::BuildExpertGroups(b.route_e, pairs, K, E, group_rows, b.up, b.down,
                                           b.n_live, b.rank, s, align));
  }
  if (p.cpu_order) {
    DI_CUDA_TRY(CpuOrderExperts(p, L, rows, capacity, s));
  } else if (group_rows == 1) {  // a one-row step (ExpertGroupRows)
    DI_CUDA_TRY(OneTokenExperts(p, L, capacity, s, limbs_in_router));
  } else {
    DI_CUDA_TRY(MmaExperts(p, L, rows, capacity, s));
  }
  if (side.forked && L.has_shared) DI_CUDA_TRY(Follow(s, side.stream, p.branches.events[2]));
  const float* shared = L.has_shared ? b.hs : nullptr;
  if (p.cpu_order) {
    DI_CUDA_TRY(
        kernels::CombineExperts(b.pair_out, b.route_e, b.route_w, shared, rows, K, d, b.y, s));
    return kernels::HyperPost(streams, b.y, b.post, b.comb, rows, c.hc_mult, d, out_streams, s);
  }
  const kernels::HyperPostArgs post{streams, b.post, b.comb, c.hc_mult, out_streams};
  return kernels::CombineExpertsPost(b.pair_out, b.route_e, b.route_w, shared, rows, K, d, post, s);
}

}  // namespace

int ExpertGroupRows(int rows) { return rows == 1 ? 1 : kernels::kExpertGroupRows; }

// The folded GEMM's tiles of 128 rows x 64 tokens pay off where experts average 64 tokens (window
// 8); at decode sizes it is 1.4-2.7x slower than mma.sync (bench/RESULTS-gpu.md).
int FoldedExpertWindow(bool folded_experts, int64_t pairs, int experts) {
  const bool takes =
      folded_experts && kernels::ExpertMmaWindow(pairs, experts) == kernels::kFoldedWindowGroups;
  return takes ? kernels::kFoldedWindowGroups : 1;
}

int AttentionSplits(int rows) {
  return static_cast<int>(std::clamp<int64_t>((264 + 4 * rows - 1) / (4 * rows), 1, 64));
}

int64_t CompressedRowsRead(const ModelConfig& cfg, const StepInputs& in, const DeviceLayerCache& c,
                           bool csa) {
  const int64_t R = in.ratios[c.ratio_index].rows_per_slot;
  return csa ? std::min<int64_t>(cfg.index_topk, R) : R;
}

int EnqueueBody(const StepPlan& p, int rows, void* s) {
  const ModelConfig& c = *p.cfg;
  const DeviceModel& m = *p.model;
  const StepBuffers& b = p.buf;
  const int n = c.hc_mult;
  const int64_t d = c.hidden_size;
  DI_CUDA_TRY(kernels::EmbedRows(reinterpret_cast<const uint16_t*>(m.embed.data), p.in.tokens, rows,
                                 d, n, b.X, s));
  for (size_t l = 0; l < m.layers.size(); ++l) {
    const DeviceLayer& L = m.layers[l];
    DI_CUDA_TRY(HyperPreNorm(p, L.hc_attn, b.X, L.attn_norm, rows, s));
    DI_CUDA_TRY(AttentionBlock(p, L, p.caches[l], rows, s));
    DI_CUDA_TRY(kernels::HyperPost(b.X, b.y, b.post, b.comb, rows, n, d, b.X2, s));
    DI_CUDA_TRY(HyperPreNorm(p, L.hc_ffn, b.X2, L.ffn_norm, rows, s));
    DI_CUDA_TRY(MoeBlock(p, L, rows, b.X2, b.X, s));
  }
  return HeadNorm(p, rows, s);
}

int EnqueueHead(const StepPlan& p, bool chosen_rows, int n_out, void* s) {
  const StepBuffers& b = p.buf;
  if (!chosen_rows) return DenseOfInput(p, p.model->head, n_out, b.logits, s);
  // b.y ([max_batch, hidden]) is free here: the last mHC post of the body has read it.
  DI_CUDA_TRY(kernels::GatherRows(b.x, p.cfg->hidden_size, p.in.out_rows, n_out, b.y, s));
  return Dense(p, p.model->head, b.y, n_out, b.logits, s);
}

}  // namespace deepinfer
