#include "engine/backend/cuda/device_attention.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>

#include "engine/backend/cuda/device_branches.h"
#include "engine/backend/cuda/device_dense.h"
#include "kernels/attention_rows.h"
#include "kernels/compress.h"
#include "kernels/dot_cpu_order.h"
#include "kernels/forward_glue.h"
#include "kernels/fused_glue.h"
#include "kernels/indexer.h"
#include "kernels/kv_row.h"
#include "kernels/linear_fp8.h"
#include "kernels/mqa_decode.h"
#include "kernels/ops.h"
#include "kernels/topk.h"

namespace deepinfer {
namespace {

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

// The indexer's head weights for each row (CSA), scaled; they read only the block's input.
int IndexerWeights(const StepPlan& p, const DeviceLayer& L, int rows, void* s) {
  const ModelConfig& c = *p.cfg;
  const int heads = c.index_n_heads;
  DI_CUDA_TRY(DenseOfInput(p, L.index_weights_proj, rows, p.buf.iw, s));
  const float scale = 1.0f / (std::sqrt(static_cast<float>(c.index_head_dim)) *
                              std::sqrt(static_cast<float>(heads)));
  return kernels::ScaleFloats(p.buf.iw, int64_t{rows} * heads, scale, s);
}

// The indexer's query for each row (CSA): its heads' rotated, Hadamard-rounded vectors.
// q_res_fp8: b.q_res's FP8 round trip where the query norm wrote it (else null).
int IndexerQuery(const StepPlan& p, const DeviceLayer& L, const float* q_res_fp8, int rows,
                 void* s) {
  const ModelConfig& c = *p.cfg;
  const StepBuffers& b = p.buf;
  const int heads = c.index_n_heads, dim = c.index_head_dim;
  DI_CUDA_TRY(Dense(p, L.index_wq_b, b.q_res, rows, b.iq, s, q_res_fp8));
  // The RoPE in the rounding's launch: a launch fewer on the path to the indexer's scores.
  const kernels::RopeArgs rope{heads, dim, c.rope_dim, L.inv_freq, p.in.pos, false};
  return kernels::HadamardFp4Rows(b.iq, int64_t{rows} * heads, dim, nullptr, b.iq, nullptr, s,
                                  c.rope_dim >= 2 ? &rope : nullptr);
}

// The indexer's pick of compressed rows for each query (CSA), after IndexerQuery and the
// indexer's compressor.
int SelectRows(const StepPlan& p, const RatioInputs& r, const DeviceLayerCache& cache, int rows,
               void* s) {
  const ModelConfig& c = *p.cfg;
  const StepBuffers& b = p.buf;
  const int64_t R = r.rows_per_slot, dim = c.index_head_dim;
  DI_CUDA_TRY(kernels::IndexerScoresMma(b.iq, b.iw, rows, c.index_n_heads, cache.keys, R * dim, R,
                                        b.scores, s, p.in.slot, r.visible));
  return kernels::RowTopK(b.scores, rows, R, r.visible, R, c.index_topk, b.topk, b.topk_ws, s);
}

}  // namespace

int AttentionBlock(const StepPlan& p, const DeviceLayer& L, const DeviceLayerCache& cache, int rows,
                   void* s) {
  const ModelConfig& c = *p.cfg;
  const StepBuffers& b = p.buf;
  const RatioInputs& r = p.in.ratios[cache.ratio_index];
  const int H = c.num_heads, D = c.head_dim, rd = c.rope_dim;
  const int64_t qr = c.q_lora_rank;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const kernels::RopeArgs rope{H, D, rd, L.inv_freq, p.in.pos, false};
  const bool csa = L.type == AttnType::kCsa;
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
  // With StepBranches, side branch 0 runs the compressors while this stream forms the query and
  // the window's row; side branch 1 forms the indexer's head weights, then its query once q_res
  // is there, then selects after branch 0's keys. The attention rows' index is built on whichever
  // side branch finishes last (it needs the selection), and both join before attention.
  const Branch pool = SideBranch(p, 0, rows, s), index = SideBranch(p, 1, rows, s);
  void* const* ev = p.branches.events;
  const Branch& rows_branch = csa ? index : pool;
  if (pool.forked) {
    DI_CUDA_TRY(Follow(pool.stream, s, ev[0]));
    if (csa) DI_CUDA_TRY(Follow(index.stream, s, ev[0]));
  }
  if (L.has_compressor) {
    DI_CUDA_TRY(Compress(pool.plan, L, L.comp, r, cache.comp_kv, cache.comp_gate, false, cache,
                         rows, pool.stream));
  }
  if (csa) {
    DI_CUDA_TRY(Compress(pool.plan, L, L.index_comp, r, cache.index_kv, cache.index_gate, true,
                         cache, rows, pool.stream));
    DI_CUDA_TRY(IndexerWeights(index.plan, L, rows, index.stream));
  }
  // wkv reads the same input as wq_a: one launch for both.
  DI_CUDA_TRY(DenseOfInputPair(p, L.wq_a, b.q_lat, L.wkv, b.kv, rows, s));
  if (p.cpu_order) {
    DI_CUDA_TRY(Norm(p, b.q_lat, L.q_norm, rows, qr, b.q_res, s));
    if (csa) DI_CUDA_TRY(IndexerQuery(p, L, nullptr, rows, s));
    DI_CUDA_TRY(Dense(p, L.wq_b, b.q_res, rows, b.q, s));
    DI_CUDA_TRY(Norm(p, b.q, nullptr, int64_t{rows} * H, D, b.q, s));
    DI_CUDA_TRY(kernels::Rope(b.q, rows, H, D, rd, L.inv_freq, p.in.pos, false, s));
    DI_CUDA_TRY(Norm(p, b.kv, L.kv_norm, rows, D, b.kv, s));
    DI_CUDA_TRY(kernels::Rope(b.kv, rows, 1, D, rd, L.inv_freq, p.in.pos, false, s));
  } else {  // the same math in five fewer launches (kernels/fused_glue.h)
    // The kv row's norm, rotation and packing into the ring (the query's window includes its own
    // row) share the query latent's norm launch: both wait on the same product, and the query's
    // chain to attention is then two launches shorter.
    kernels::RopeArgs kv_rope = rope;
    kv_rope.heads = 1;
    kernels::NormJob q_job, kv_job;
    q_job = {b.q_lat, L.q_norm, rows, qr, eps, nullptr, b.q_res, b.act};
    kv_job = {b.kv, L.kv_norm, rows, D, eps, &kv_rope, b.kv, nullptr, cache.pool, r.ring_dest};
    DI_CUDA_TRY(kernels::RmsNormRopeQdqPair(q_job, kv_job, s));
    if (csa) {
      if (index.forked) DI_CUDA_TRY(Follow(index.stream, s, ev[1]));
      DI_CUDA_TRY(IndexerQuery(index.plan, L, b.act, rows, index.stream));
    }
    DI_CUDA_TRY(Dense(p, L.wq_b, b.q_res, rows, b.q, s, b.act));
    DI_CUDA_TRY(
        kernels::RmsNormRopeQdq(b.q, nullptr, int64_t{rows} * H, D, eps, &rope, b.q, nullptr, s));
  }
  // Into the ring first: the query's window includes its own row.
  if (p.cpu_order) DI_CUDA_TRY(kernels::PackKvRows(b.kv, rows, cache.pool, s, r.ring_dest));
  if (csa) {
    if (index.forked) DI_CUDA_TRY(Follow(index.stream, pool.stream, ev[2]));
    DI_CUDA_TRY(SelectRows(index.plan, r, cache, rows, index.stream));
  }
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
    DI_CUDA_TRY(kernels::BuildAttentionRows(a, b.offsets, b.row_index, rows_branch.stream));
    if (rows_branch.forked) DI_CUDA_TRY(Follow(s, rows_branch.stream, ev[3]));
    // The output's inverse rotation and FP8 round trip (wo_a's input) in the combine's launch.
    kernels::RopeArgs out_rope = rope;
    out_rope.inverse = true;
    DI_CUDA_TRY(kernels::MqaDecodeFp8Rows(b.q, cache.pool, b.row_index, b.offsets, rows, H, D,
                                          L.sinks, scale, max_rows, AttentionSplits(rows),
                                          b.attn_scratch, b.o, s, &out_rope, b.oq));
  }
  // The grouped low-rank output: group g's heads through rows [g * rank, (g + 1) * rank) of wo_a.
  const int G = c.o_groups;
  const int64_t rank = c.o_lora_rank, hd = int64_t{H} * D, group_in = hd / G;
  if (p.cpu_order) {
    DI_CUDA_TRY(kernels::Rope(b.o, rows, H, D, rd, L.inv_freq, p.in.pos, true, s));
    DI_CUDA_TRY(kernels::QdqFp8Rows(b.o, rows, hd, b.oq, s));
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

}  // namespace deepinfer
