#include "engine/backend/cuda/device_step.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cassert>
#include <cmath>

#include "engine/backend/cuda/device_dense.h"
#include "kernels/attention_rows.h"
#include "kernels/compress.h"
#include "kernels/dot_cpu_order.h"
#include "kernels/expert_fp4_limbs.h"
#include "kernels/forward_glue.h"
#include "kernels/fused_glue.h"
#include "kernels/indexer.h"
#include "kernels/kv_row.h"
#include "kernels/linear_bf16.h"
#include "kernels/linear_fp8.h"
#include "kernels/mqa_decode.h"
#include "kernels/norm_fast.h"
#include "kernels/ops.h"
#include "kernels/route.h"
#include "kernels/topk.h"

namespace deepinfer {
namespace {

int Norm(const StepPlan& p, const float* x, const float* weight, int64_t rows, int64_t dim,
         float* y, void* s) {
  const float eps = static_cast<float>(p.cfg->rms_norm_eps);
  return p.cpu_order ? kernels::RmsNorm(x, weight, rows, dim, eps, y, s)
                     : kernels::RmsNormFast(x, weight, rows, dim, eps, y, s);
}

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

// A compressor's step: project, pool the windows that close, then normalise, rotate (RoPE at the
// window's first position) and store each closed row — KV rows into the pool's 584-byte rows,
// indexer keys (Hadamard + FP4) as bf16 — at the rows the host computed (-1: none closed).
int Compress(const StepPlan& p, const DeviceLayer& L, const DeviceCompressor& c,
             const RatioInputs& r, float* kv_state, float* gate_state, bool indexer,
             const DeviceLayerCache& cache, int rows, void* s) {
  const StepBuffers& b = p.buf;
  const int proj = c.shape.proj(), width = c.shape.width;
  DI_CUDA_TRY(DenseOfInputPair(p, c.wkv, b.comp_kv, c.wgate, b.comp_gate, rows, s));
  DI_CUDA_TRY(kernels::CompressorPool(c.shape, b.comp_kv, b.comp_gate, proj, c.ape, p.in.pos,
                                      p.in.seg_begin, rows, p.in.seg_slot, kv_state, gate_state,
                                      b.pooled, b.emitted, s));
  if (p.cpu_order) {
    DI_CUDA_TRY(Norm(p, b.pooled, c.norm, rows, width, b.pooled_n, s));
    DI_CUDA_TRY(kernels::Rope(b.pooled_n, rows, 1, width, p.cfg->rope_dim, L.inv_freq, r.comp_pos,
                              false, s));
  } else {  // the same bits in one launch (kernels/fused_glue.h)
    const kernels::RopeArgs rope{1, width, p.cfg->rope_dim, L.inv_freq, r.comp_pos, false};
    DI_CUDA_TRY(kernels::RmsNormRopeQdq(b.pooled, c.norm, rows, width,
                                        static_cast<float>(p.cfg->rms_norm_eps), &rope, b.pooled_n,
                                        nullptr, s));
  }
  if (indexer) {
    return kernels::HadamardFp4Rows(b.pooled_n, rows, width, r.comp_dest, nullptr, cache.keys, s);
  }
  return kernels::PackKvRows(b.pooled_n, rows, cache.pool, s, r.comp_dest);
}

// The indexer's pick of compressed rows for each query (CSA).
int SelectRows(const StepPlan& p, const DeviceLayer& L, const RatioInputs& r,
               const DeviceLayerCache& cache, int rows, void* s) {
  const ModelConfig& c = *p.cfg;
  const StepBuffers& b = p.buf;
  const int heads = c.index_n_heads, dim = c.index_head_dim;
  DI_CUDA_TRY(Dense(p, L.index_wq_b, b.q_res, rows, b.iq, s));
  DI_CUDA_TRY(kernels::Rope(b.iq, rows, heads, dim, c.rope_dim, L.inv_freq, p.in.pos, false, s));
  DI_CUDA_TRY(
      kernels::HadamardFp4Rows(b.iq, int64_t{rows} * heads, dim, nullptr, b.iq, nullptr, s));
  DI_CUDA_TRY(DenseOfInput(p, L.index_weights_proj, rows, b.iw, s));
  const float scale =
      1.0f / (std::sqrt(static_cast<float>(dim)) * std::sqrt(static_cast<float>(heads)));
  DI_CUDA_TRY(kernels::ScaleFloats(b.iw, int64_t{rows} * heads, scale, s));
  const int64_t R = r.rows_per_slot;
  DI_CUDA_TRY(kernels::IndexerScoresMma(b.iq, b.iw, rows, heads, cache.keys, R * dim, R, b.scores,
                                        s, p.in.slot, r.visible));
  return kernels::RowTopK(b.scores, rows, R, r.visible, R, c.index_topk, b.topk, b.topk_ws, s);
}

int AttentionBlock(const StepPlan& p, const DeviceLayer& L, const DeviceLayerCache& cache, int rows,
                   void* s) {
  const ModelConfig& c = *p.cfg;
  const StepBuffers& b = p.buf;
  const RatioInputs& r = p.in.ratios[cache.ratio_index];
  const int H = c.num_heads, D = c.head_dim, rd = c.rope_dim;
  const int64_t qr = c.q_lora_rank;
  const float eps = static_cast<float>(c.rms_norm_eps);
  kernels::RopeArgs rope{H, D, rd, L.inv_freq, p.in.pos, false};
  // wkv reads the same input as wq_a: one launch for both.
  DI_CUDA_TRY(DenseOfInputPair(p, L.wq_a, b.q_lat, L.wkv, b.kv, rows, s));
  if (p.cpu_order) {
    DI_CUDA_TRY(Norm(p, b.q_lat, L.q_norm, rows, qr, b.q_res, s));
    DI_CUDA_TRY(Dense(p, L.wq_b, b.q_res, rows, b.q, s));
    DI_CUDA_TRY(Norm(p, b.q, nullptr, int64_t{rows} * H, D, b.q, s));
    DI_CUDA_TRY(kernels::Rope(b.q, rows, H, D, rd, L.inv_freq, p.in.pos, false, s));
    DI_CUDA_TRY(Norm(p, b.kv, L.kv_norm, rows, D, b.kv, s));
    DI_CUDA_TRY(kernels::Rope(b.kv, rows, 1, D, rd, L.inv_freq, p.in.pos, false, s));
  } else {  // the same math in three fewer launches (kernels/fused_glue.h)
    DI_CUDA_TRY(
        kernels::RmsNormRopeQdq(b.q_lat, L.q_norm, rows, qr, eps, nullptr, b.q_res, b.act, s));
    DI_CUDA_TRY(Dense(p, L.wq_b, b.q_res, rows, b.q, s, b.act));
    DI_CUDA_TRY(
        kernels::RmsNormRopeQdq(b.q, nullptr, int64_t{rows} * H, D, eps, &rope, b.q, nullptr, s));
    kernels::RopeArgs kv_rope = rope;
    kv_rope.heads = 1;
    DI_CUDA_TRY(kernels::RmsNormRopeQdq(b.kv, L.kv_norm, rows, D, eps, &kv_rope, b.kv, nullptr, s));
  }
  // Into the ring first: the query's window includes its own row.
  DI_CUDA_TRY(kernels::PackKvRows(b.kv, rows, cache.pool, s, r.ring_dest));
  if (L.has_compressor) {
    DI_CUDA_TRY(Compress(p, L, L.comp, r, cache.comp_kv, cache.comp_gate, false, cache, rows, s));
  }
  const bool csa = L.type == AttnType::kCsa;
  if (csa) {
    DI_CUDA_TRY(
        Compress(p, L, L.index_comp, r, cache.index_kv, cache.index_gate, true, cache, rows, s));
    DI_CUDA_TRY(SelectRows(p, L, r, cache, rows, s));
  }
  kernels::AttentionRowsArgs a;
  a.queries = rows;
  a.pos = p.in.pos;
  a.ring_row = r.ring_row;
  a.window = p.window;
  a.ring = p.ring;
  a.visible = r.visible;
  a.selected = csa ? b.topk : nullptr;
  a.top_k = csa ? c.index_topk : 0;
  a.page_table = r.page;
  a.pages_per_query = 1;
  a.page_rows = static_cast<int>(std::max<int64_t>(1, r.rows_per_slot));
  const int64_t max_rows = p.window + CompressedRowsRead(c, p.in, cache, csa);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  if (p.cpu_order) {
    // Entries past a query's rows are unpacked too (row 0): the count stays on the device.
    const int64_t entries = rows * max_rows;
    DI_CUDA_TRY(static_cast<int>(
        cudaMemsetAsync(b.row_index, 0, entries * sizeof(int32_t), static_cast<cudaStream_t>(s))));
    DI_CUDA_TRY(kernels::BuildAttentionRows(a, b.offsets, b.row_index, s));
    DI_CUDA_TRY(kernels::UnpackKvRows(cache.pool, entries, b.gathered, s, b.row_index));
    DI_CUDA_TRY(kernels::SparseAttention(b.q, b.gathered, b.offsets, rows, H, D, L.sinks, scale,
                                         b.o, s, max_rows));
  } else {
    DI_CUDA_TRY(kernels::BuildAttentionRows(a, b.offsets, b.row_index, s));
    DI_CUDA_TRY(kernels::MqaDecodeFp8Rows(b.q, cache.pool, b.row_index, b.offsets, rows, H, D,
                                          L.sinks, scale, max_rows, AttentionSplits(rows),
                                          b.attn_scratch, b.o, s));
  }
  // The grouped low-rank output: group g's heads through rows [g * rank, (g + 1) * rank) of wo_a.
  const int G = c.o_groups;
  const int64_t rank = c.o_lora_rank, hd = int64_t{H} * D, group_in = hd / G;
  if (p.cpu_order) {
    DI_CUDA_TRY(kernels::Rope(b.o, rows, H, D, rd, L.inv_freq, p.in.pos, true, s));
    DI_CUDA_TRY(kernels::QdqFp8Rows(b.o, rows, hd, b.oq, s));
  } else {
    rope.inverse = true;
    DI_CUDA_TRY(kernels::RopeQdq(b.o, rows, rope, b.o, b.oq, s));
  }
  for (int g = 0; p.cpu_order && g < G; ++g) {
    DI_CUDA_TRY(kernels::QuantizedDotCpuOrder(
        kernels::StoredFormat::kFp8Block128, L.wo_a.data, L.wo_a.scale, g * rank, rank, group_in,
        b.oq + g * group_in, hd, rows, b.z + g * rank, G * rank, s));
  }
  for (int r0 = 0; !p.cpu_order && r0 < rows; r0 += kGemvRows) {
    DI_CUDA_TRY(kernels::Fp8BlockGemvGrouped(
        L.wo_a.data, L.wo_a.scale, G, rank, group_in, b.oq + r0 * hd, group_in, hd,
        std::min(kGemvRows, rows - r0), b.z + r0 * G * rank, rank, G * rank, s));
  }
  return Dense(p, L.wo_b, b.z, rows, b.y, s);
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
int OneTokenExperts(const StepPlan& p, const DeviceLayer& L, int capacity, void* s) {
  const ModelConfig& c = *p.cfg;
  const StepBuffers& b = p.buf;
  const int64_t d = c.hidden_size, inter = c.moe_intermediate_size, pairs = c.num_experts_per_tok;
  const float limit = static_cast<float>(c.swiglu_limit);
  if (d % 128 == 0 && inter % 128 == 0) {
    uint8_t* const pair_limbs = b.limbs + 3 * d;
    float* const pair_scales = b.limb_scale + d / 128;
    DI_CUDA_TRY(kernels::ActLimbsFp8(b.xq, 1, d, b.limbs, b.limb_scale, s));
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
// window or batch it comes in.
int MmaExperts(const StepPlan& p, const DeviceLayer& L, int rows, int capacity, void* s) {
  const ModelConfig& c = *p.cfg;
  const StepBuffers& b = p.buf;
  const int64_t d = c.hidden_size, inter = c.moe_intermediate_size;
  const int64_t pairs = int64_t{rows} * c.num_experts_per_tok;
  const float limit = static_cast<float>(c.swiglu_limit);
  const int64_t rows_padded = kernels::Fp8GemmPaddedRows(rows);
  const int expert_window = kernels::ExpertMmaWindow(pairs, c.n_routed_experts);
  DI_CUDA_TRY(kernels::QuantizeActFp8(b.x, rows, d, b.act8, b.act8_scale, s));
  DI_CUDA_TRY(kernels::Fp4ExpertMmaPair(L.w1, L.s1, b.pair_g, L.w3, L.s3, b.pair_u, inter, d, b.up,
                                        capacity, b.act8, b.act8_scale, rows_padded, s, b.n_live,
                                        expert_window));
  DI_CUDA_TRY(kernels::SwiGlu(b.pair_g, b.pair_u, pairs * inter, limit, b.pair_act, s));
  DI_CUDA_TRY(kernels::QuantizeActFp8(b.pair_act, pairs, inter, b.pair8, b.pair8_scale, s));
  return kernels::Fp4ExpertMma(L.w2, L.s2, d, inter, b.down, capacity, b.pair8, b.pair8_scale,
                               kernels::Fp8GemmPaddedRows(pairs), b.pair_out, s, b.n_live,
                               expert_window);
}

int MoeBlock(const StepPlan& p, const DeviceLayer& L, int rows, void* s) {
  const ModelConfig& c = *p.cfg;
  const StepBuffers& b = p.buf;
  const int E = c.n_routed_experts, K = c.num_experts_per_tok;
  const int64_t d = c.hidden_size, pairs = int64_t{rows} * K;
  const float limit = static_cast<float>(c.swiglu_limit);
  DI_CUDA_TRY(DenseOfInput(p, L.gate, rows, b.gate_logits, s));
  kernels::RouterParams rp;
  rp.experts = E;
  rp.top_k = K;
  rp.scoring = static_cast<kernels::RouterScoring>(static_cast<int>(c.scoring_func));
  rp.norm_topk_prob = c.norm_topk_prob;
  rp.routed_scaling = static_cast<float>(c.routed_scaling_factor);
  DI_CUDA_TRY(kernels::RouteTokens(b.gate_logits, L.gate_bias, L.tid2eid, p.in.tokens, rows, rp,
                                   b.route_e, b.route_w, s));
  const int group_rows = ExpertGroupRows(rows);
  const int capacity = static_cast<int>(kernels::MaxExpertGroups(pairs, E, group_rows));
  DI_CUDA_TRY(kernels::BuildExpertGroups(b.route_e, pairs, K, E, group_rows, b.up, b.down, b.n_live,
                                         b.rank, s));
  if (p.cpu_order) {
    DI_CUDA_TRY(CpuOrderExperts(p, L, rows, capacity, s));
  } else if (group_rows == 1) {  // a one-row step (ExpertGroupRows)
    DI_CUDA_TRY(OneTokenExperts(p, L, capacity, s));
  } else {
    DI_CUDA_TRY(MmaExperts(p, L, rows, capacity, s));
  }
  if (L.has_shared) {
    DI_CUDA_TRY(DenseOfInputPair(p, L.shared_w1, b.sg, L.shared_w3, b.su, rows, s));
    if (p.cpu_order) {
      DI_CUDA_TRY(kernels::SwiGlu(b.sg, b.su, rows * L.shared_w1.out, limit, b.sa, s));
      DI_CUDA_TRY(Dense(p, L.shared_w2, b.sa, rows, b.hs, s));
    } else {  // SwiGLU and w2's FP8 input in one launch
      DI_CUDA_TRY(kernels::SwiGluQdq(b.sg, b.su, rows, L.shared_w1.out, limit, b.sa, b.act, s));
      DI_CUDA_TRY(Dense(p, L.shared_w2, b.sa, rows, b.hs, s, b.act));
    }
  }
  return kernels::CombineExperts(b.pair_out, b.route_e, b.route_w, L.has_shared ? b.hs : nullptr,
                                 rows, K, d, b.y, s);
}

}  // namespace

int ExpertGroupRows(int rows) { return rows == 1 ? 1 : kernels::kExpertGroupRows; }

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
    DI_CUDA_TRY(MoeBlock(p, L, rows, s));
    DI_CUDA_TRY(kernels::HyperPost(b.X2, b.y, b.post, b.comb, rows, n, d, b.X, s));
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
