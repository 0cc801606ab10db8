// The device forward's caches and its activations and scratch (engine/backend/cuda/
// device_step.h), sized once for every slot and the largest batch bucket: nothing is allocated
// while it runs.
#include <algorithm>

#include "engine/backend/cuda/device_step.h"
#include "kernels/kv_row.h"
#include "kernels/mqa_decode.h"
#include "kernels/norm_fast.h"
#include "kernels/route.h"
#include "kernels/topk.h"

namespace deepinfer {
namespace {

// The widest input of a dense product: the FP8 scratch's row length.
int64_t MaxProductInput(const StepPlan& plan) {
  const ModelConfig& c = *plan.cfg;
  int64_t shared_inter = 1;
  for (const DeviceLayer& L : plan.model->layers) {
    if (L.has_shared) shared_inter = std::max(shared_inter, L.shared_w1.out);
  }
  return std::max<int64_t>({c.hidden_size, c.q_lora_rank, int64_t{c.num_heads} * c.head_dim,
                            int64_t{c.o_groups} * c.o_lora_rank, c.moe_intermediate_size,
                            shared_inter});
}

}  // namespace

Status AllocSideBuffers(const StepPlan& plan, int max_batch, DeviceMemory& mem, StepBuffers* out) {
  *out = plan.buf;
  const int64_t B = kernels::Fp8GemmPaddedRows(std::min(max_batch, kGemvMaxRows));
  const int64_t max_in = MaxProductInput(plan);
  DI_ASSIGN_OR_RETURN(out->act, mem.Take<float>(B * max_in));
  DI_ASSIGN_OR_RETURN(out->act8, mem.Take<uint8_t>(B * max_in));
  DI_ASSIGN_OR_RETURN(out->act8_scale, mem.Take<float>(kernels::Fp8ActScaleCount(B, max_in)));
  return Status::Ok();
}

Status AllocStepBuffers(const StepPlan& plan, int max_batch, DeviceMemory& mem, StepBuffers* out) {
  const ModelConfig& c = *plan.cfg;
  // Row buffers hold the GEMM's padded row count (kernels/gemm_fp8.h writes the padding rows).
  const int64_t B = kernels::Fp8GemmPaddedRows(max_batch), n = c.hc_mult, d = c.hidden_size,
                S = n * d;
  const int64_t qr = c.q_lora_rank, HD = int64_t{c.num_heads} * c.head_dim;
  const int64_t Z = int64_t{c.o_groups} * c.o_lora_rank, K = c.num_experts_per_tok;
  const int64_t inter = c.moe_intermediate_size, E = c.n_routed_experts;
  int64_t shared_inter = 1, keys = 1, comp_read = 0;
  size_t topk_ws = 16;
  int64_t attn_scratch = 0, groups = 1;
  for (size_t l = 0; l < plan.model->layers.size(); ++l) {
    const DeviceLayer& L = plan.model->layers[l];
    if (L.has_shared) shared_inter = std::max(shared_inter, L.shared_w1.out);
    const bool csa = L.type == AttnType::kCsa;
    const int64_t R = plan.in.ratios[plan.caches[l].ratio_index].rows_per_slot;
    if (csa) keys = std::max(keys, R);
    comp_read = std::max(comp_read, CompressedRowsRead(c, plan.in, plan.caches[l], csa));
  }
  for (int64_t b = 1; b <= max_batch; ++b) {
    if (c.index_topk > 0) {
      topk_ws = std::max(topk_ws, kernels::RowTopKWorkspace(b, keys, c.index_topk));
    }
    attn_scratch = std::max(
        attn_scratch, kernels::MqaDecodeScratch(b, c.num_heads, c.head_dim, AttentionSplits(b)));
    groups = std::max(groups,
                      kernels::MaxExpertGroups(b * K, E, ExpertGroupRows(b),
                                               FoldedExpertWindow(plan.folded_experts, b * K, E)));
  }
  const int64_t max_in = MaxProductInput(plan);
  StepBuffers& b = *out;
  auto f = [&](float** p, int64_t count) -> Status {
    DI_ASSIGN_OR_RETURN(*p, mem.Take<float>(std::max<int64_t>(count, 1)));
    return Status::Ok();
  };
  auto i32 = [&](int32_t** p, int64_t count) -> Status {
    DI_ASSIGN_OR_RETURN(*p, mem.Take<int32_t>(std::max<int64_t>(count, 1)));
    return Status::Ok();
  };
  for (float** p : {&b.X, &b.X2}) DI_RETURN_IF_ERROR(f(p, B * S));
  for (float** p : {&b.h, &b.x, &b.xq, &b.y, &b.hs}) DI_RETURN_IF_ERROR(f(p, B * d));
  DI_RETURN_IF_ERROR(f(&b.post, B * n));
  DI_RETURN_IF_ERROR(f(&b.comb, B * n * n));
  DI_RETURN_IF_ERROR(f(&b.hc_scratch, B * ((2 + n) * n + 1) * kernels::kHyperSlices));
  DI_RETURN_IF_ERROR(f(&b.act, B * max_in));
  for (float** p : {&b.q_lat, &b.q_res}) DI_RETURN_IF_ERROR(f(p, B * qr));
  for (float** p : {&b.q, &b.o, &b.oq}) DI_RETURN_IF_ERROR(f(p, B * HD));
  DI_RETURN_IF_ERROR(f(&b.kv, B * c.head_dim));
  DI_RETURN_IF_ERROR(f(&b.z, B * Z));
  for (float** p : {&b.comp_kv, &b.comp_gate}) DI_RETURN_IF_ERROR(f(p, B * 2 * c.head_dim));
  for (float** p : {&b.pooled, &b.pooled_n}) DI_RETURN_IF_ERROR(f(p, B * c.head_dim));
  DI_RETURN_IF_ERROR(i32(&b.emitted, B));
  DI_RETURN_IF_ERROR(f(&b.iq, B * c.index_n_heads * c.index_head_dim));
  DI_RETURN_IF_ERROR(f(&b.iw, B * c.index_n_heads));
  DI_RETURN_IF_ERROR(f(&b.scores, B * keys));
  DI_RETURN_IF_ERROR(i32(&b.topk, B * std::max(1, c.index_topk)));
  DI_ASSIGN_OR_RETURN(b.topk_ws, mem.Alloc(topk_ws));
  DI_RETURN_IF_ERROR(i32(&b.row_index, B * (c.sliding_window + comp_read)));
  DI_ASSIGN_OR_RETURN(b.offsets, mem.Take<int64_t>(B + 1));
  DI_RETURN_IF_ERROR(f(&b.attn_scratch, attn_scratch));
  DI_RETURN_IF_ERROR(f(&b.gate_logits, B * E));
  DI_RETURN_IF_ERROR(f(&b.route_w, B * K));
  for (int32_t** p : {&b.route_e, &b.rank}) DI_RETURN_IF_ERROR(i32(p, B * K));
  DI_RETURN_IF_ERROR(i32(&b.n_live, 1));
  DI_ASSIGN_OR_RETURN(b.up, mem.Take<kernels::ExpertGroup>(groups));
  DI_ASSIGN_OR_RETURN(b.down, mem.Take<kernels::ExpertGroup>(groups));
  DI_RETURN_IF_ERROR(f(&b.pair_act, B * K * inter));
  DI_RETURN_IF_ERROR(f(&b.pair_out, B * K * d));
  for (float** p : {&b.sg, &b.su, &b.sa}) DI_RETURN_IF_ERROR(f(p, B * shared_inter));
  if (plan.cpu_order) {
    DI_RETURN_IF_ERROR(f(&b.gathered, B * (c.sliding_window + comp_read) * c.head_dim));
  }
  for (float** p : {&b.pair_g, &b.pair_u}) DI_RETURN_IF_ERROR(f(p, B * K * inter));
  // e4m3 activations with their scales: the tensor-core experts from two rows, the FP8 GEMM above
  // kGemvMaxRows.
  const int64_t pairs = kernels::Fp8GemmPaddedRows(int64_t{max_batch} * K);
  DI_ASSIGN_OR_RETURN(b.act8, mem.Take<uint8_t>(B * max_in));
  DI_RETURN_IF_ERROR(f(&b.act8_scale, kernels::Fp8ActScaleCount(B, max_in)));
  DI_ASSIGN_OR_RETURN(b.pair8, mem.Take<uint8_t>(pairs * inter));
  DI_RETURN_IF_ERROR(f(&b.pair8_scale, kernels::Fp8ActScaleCount(pairs, inter)));
  const int64_t limb_values = d + K * inter;  // one row's, then its K pairs'
  DI_ASSIGN_OR_RETURN(b.limbs, mem.Take<uint8_t>(limb_values * 3));
  DI_RETURN_IF_ERROR(f(&b.limb_scale, limb_values / 128));  // used where d, inter are 128-blocks
  if (max_batch > kGemvMaxRows) {
    DI_ASSIGN_OR_RETURN(b.split, mem.Take<uint16_t>(2 * B * max_in));
  }
  return f(&b.logits, B * c.vocab_size);
}

Status AllocLayerCaches(const StepPlan& plan, int slots_in_use, DeviceMemory& mem,
                        std::vector<DeviceLayerCache>* caches) {
  const ModelConfig& c = *plan.cfg;
  const int64_t ring = plan.ring, slots = slots_in_use + 1;  // + the padding rows' slot
  for (const DeviceLayer& L : plan.model->layers) {
    DeviceLayerCache cache;
    for (size_t r = 0; r < plan.in.ratios.size(); ++r) {
      if (plan.in.ratios[r].ratio == L.ratio) cache.ratio_index = static_cast<int>(r);
    }
    const int64_t R = plan.in.ratios[cache.ratio_index].rows_per_slot;
    // Pool rows are int32 in the step's row indices.
    if (slots * (R + ring) > 0x7fffffff) {
      return InvalidArgument("device forward: cache too large");
    }
    DI_ASSIGN_OR_RETURN(cache.pool, mem.Take<uint8_t>(slots * (R + ring) * kernels::kKvRowBytes));
    if (L.has_compressor) {
      const int64_t sf = L.comp.shape.state_floats();
      DI_ASSIGN_OR_RETURN(cache.comp_kv, mem.Take<float>(slots * sf));
      DI_ASSIGN_OR_RETURN(cache.comp_gate, mem.Take<float>(slots * sf));
    }
    if (L.has_indexer) {
      const int64_t sf = L.index_comp.shape.state_floats();
      DI_ASSIGN_OR_RETURN(cache.keys, mem.Take<uint16_t>(slots * R * c.index_head_dim));
      DI_ASSIGN_OR_RETURN(cache.index_kv, mem.Take<float>(slots * sf));
      DI_ASSIGN_OR_RETURN(cache.index_gate, mem.Take<float>(slots * sf));
    }
    caches->push_back(cache);
  }
  return Status::Ok();
}

}  // namespace deepinfer
