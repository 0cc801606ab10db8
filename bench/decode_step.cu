// The kernels of one decode step of a layer, in order, with their floors (bench/decode_layer.h).
#include <cuda_runtime.h>

#include <algorithm>
#include <random>
#include <set>

#include "bench/decode_experts.h"
#include "bench/decode_layer.h"
#include "kernels/compress.h"
#include "kernels/expert_fp4.h"
#include "kernels/expert_fp4_wgmma.h"
#include "kernels/gemm_bf16.h"
#include "kernels/gemm_fp8.h"
#include "kernels/indexer.h"
#include "kernels/kv_row.h"
#include "kernels/linear_bf16.h"
#include "kernels/linear_fp8.h"
#include "kernels/mqa_decode.h"
#include "kernels/norm_fast.h"
#include "kernels/ops.h"
#include "kernels/route.h"
#include "kernels/topk.h"

namespace deepinfer::bench {
namespace {

int Fp8Rows(const Fp8Weight& w, int64_t out_begin, int64_t out, const float* x, int rows, float* y,
            cudaStream_t s) {
  for (int r = 0; r < rows; r += 8) {  // the GEMV takes up to 8 rows; larger batches await a GEMM
    const int e =
        kernels::Fp8BlockGemv(w.w + out_begin * w.in, w.scale + (out_begin / 128) * (w.in / 128),
                              out, w.in, x + r * w.in, std::min(8, rows - r), y + r * out, s);
    if (e) return e;
  }
  return 0;
}

int Bf16Rows(const Bf16Weight& w, const float* x, int rows, float* y, cudaStream_t s) {
  for (int r = 0; r < rows; r += 8) {
    const int e =
        kernels::Bf16Gemv(w.w, w.out, w.in, x + r * w.in, std::min(8, rows - r), y + r * w.out, s);
    if (e) return e;
  }
  return 0;
}

// Bytes one expert's three tensors occupy in MXFP4 with their scales.
constexpr double kExpertBytes = 3.0 * (kMoeInter * kHidden / 2 + kMoeInter * kHidden / 32);
// The reference cache row: 448 e4m3 + 64 bf16 RoPE values + 7 scales + 1 pad.
constexpr double kCacheRowBytes = 584, kIndexKeyBytes = 132;

}  // namespace

std::vector<Op> DecodeStepOps(DeviceArena& a, bool csa, int B, int64_t context, int layers,
                              uint32_t seed, StepKernels k, bool prefill) {
  const int64_t flat = kHc * kHidden, qdim = kHeads * kHeadDim;
  const int64_t n_rows = kWindow + (csa ? std::min(kIndexTopK, context / 4) : context / 128);
  const int64_t n_keys = csa ? context / 4 : 0;
  // Activations, shared by the layer copies, with the GEMM's padded row count.
  const int64_t Bp = kernels::Fp8GemmPaddedRows(B);
  uint8_t* xq = a.Take<uint8_t>(Bp * kOGroups * kOLora);
  float* xs = a.Take<float>(kernels::Fp8ActScaleCount(Bp, kOGroups * kOLora));
  float* hc_scratch = a.Take<float>(Bp * (kHcMix + 1) * kernels::kHyperSlices);
  // Attention splits a query's rows while too few queries fill the GPU; scratch sized for it.
  const int max_splits = static_cast<int>(std::clamp<int64_t>((264 + 4 * B - 1) / (4 * B), 1, 64));
  uint16_t* split = a.Take<uint16_t>(2 * Bp * kHidden);  // the bf16 GEMM's activation terms
  float* attn_scratch = a.Take<float>(kernels::MqaDecodeScratch(B, kHeads, kHeadDim, max_splits));
  float *streams = a.Take<float>(Bp * flat), *streams2 = a.Take<float>(Bp * flat);
  float *post = a.Take<float>(Bp * kHc), *comb = a.Take<float>(Bp * kHc * kHc);
  float *x = a.Take<float>(Bp * kHidden), *xn = a.Take<float>(Bp * kHidden);
  float* xn_fp8 = a.Take<float>(Bp * kHidden);
  float *qlat = a.Take<float>(Bp * kQLora), *q = a.Take<float>(Bp * qdim);
  float *kv = a.Take<float>(Bp * kHeadDim), *comp = a.Take<float>(Bp * 4 * kHeadDim);
  float *iq = a.Take<float>(Bp * kIndexHeads * kIndexDim), *icomp = a.Take<float>(Bp * 512);
  float *iw = a.Take<float>(Bp * kIndexHeads),
        *scores = a.Take<float>(Bp * std::max<int64_t>(1, n_keys));
  int32_t* topk_idx = a.Take<int32_t>(Bp * kIndexTopK);
  uint8_t* topk_ws =
      a.Take<uint8_t>(std::max<size_t>(16, kernels::RowTopKWorkspace(B, n_keys, kIndexTopK)));
  float *o = a.Take<float>(Bp * qdim), *z = a.Take<float>(Bp * kOGroups * kOLora);
  float* o_fp8 = a.Take<float>(Bp * qdim);  // the attention output's FP8 round trip (wo_a's input)
  float *h = a.Take<float>(Bp * kHidden), *logits = a.Take<float>(Bp * kExperts);
  float *sg = a.Take<float>(Bp * kMoeInter), *su = a.Take<float>(Bp * kMoeInter);
  float* sa = a.Take<float>(Bp * kMoeInter);
  const int64_t pairs = B * kTopK;
  RoutedExpertsStep ex;
  const bool expert_buffers = TakeRoutedExpertBuffers(a, pairs, &ex);
  int64_t *positions = a.Take<int64_t>(B), *offsets = a.Take<int64_t>(B + 1);
  // Routing runs on the device on fixed random logits (the same for every layer copy), so the
  // experts it picks, and with them the floor, are read back once here.
  // The experts' kernels by --experts and their group bound, fixed by the batch so that no
  // routing makes a group the kernel skips: the CUDA-core GEMV's (its registers sized by it: 1
  // token at batch 1, 2 up to batch 8) or the mma's 8 (a hot expert takes more groups).
  const bool cuda_core = k.cpu_order || (k.experts == ExpertKernels::kAuto && B == 1) ||
                         (k.experts == ExpertKernels::kCudaCore && B <= 8);
  const int group_rows = !cuda_core ? kernels::kExpertGroupRows : B == 1 ? 1 : 2;
  // The folded GEMM's windows: each expert's groups padded to whole ones, as the device forward.
  const int align =
      k.experts == ExpertKernels::kFolded && !cuda_core ? kernels::kFoldedWindowGroups : 1;
  const int64_t capacity = kernels::MaxExpertGroups(pairs, kExperts, group_rows, align);
  float *route_logits = a.Take<float>(Bp * kExperts), *route_bias = a.Take<float>(kExperts),
        *route_w = a.Take<float>(pairs);
  int32_t *route_e = a.Take<int32_t>(pairs), *route_rank = a.Take<int32_t>(pairs),
          *n_live = a.Take<int32_t>(1);
  auto* d_up = a.Take<kernels::ExpertGroup>(capacity);
  auto* d_down = a.Take<kernels::ExpertGroup>(capacity);
  float* hs = a.Take<float>(Bp * kHidden);  // the shared expert's output, before the combine
  if (!hs || !d_down) return {};
  FillFloats(route_logits, B * kExperts, seed + 3, 4.0f);
  FillFloats(route_bias, kExperts, seed + 4, 1e-3f);  // balanced: the bias only breaks near-ties
  kernels::RouterParams rp;
  rp.experts = kExperts;
  rp.top_k = kTopK;
  rp.routed_scaling = 1.5f;
  int32_t live = 0;
  std::vector<kernels::ExpertGroup> up_groups(capacity);
  if (kernels::RouteTokens(route_logits, route_bias, nullptr, nullptr, B, rp, route_e, route_w,
                           nullptr) ||
      kernels::BuildExpertGroups(route_e, pairs, kTopK, kExperts, group_rows, d_up, d_down, n_live,
                                 route_rank, nullptr, align) ||
      cudaMemcpy(&live, n_live, sizeof(live), cudaMemcpyDeviceToHost) != cudaSuccess ||
      cudaMemcpy(up_groups.data(), d_up, capacity * sizeof(up_groups[0]), cudaMemcpyDeviceToHost) !=
          cudaSuccess) {
    return {};
  }
  up_groups.resize(live);
  std::set<int> chosen;
  for (const auto& g : up_groups) chosen.insert(g.expert);
  const int distinct = static_cast<int>(chosen.size());
  // The cache each layer copy reads: attention rows in the 584-byte reference layout (fp32 rows
  // for the CPU-order kernels). Decode: each sequence's attention rows gathered per query, and
  // its own index keys. Prefill (one sequence): a pool of the chunk's window rows and the
  // sequence's compressed rows that every token indexes into, and one set of index keys.
  const int64_t compressed = csa ? context / 4 : context / 128;
  const int64_t pool_rows = prefill ? B + compressed : B * n_rows;
  const int64_t key_rows = prefill ? n_keys : B * n_keys;
  uint8_t* new_rows = a.Take<uint8_t>(Bp * kernels::kKvRowBytes);  // the step's own KV rows
  const int64_t fill_rows = std::min<int64_t>(pool_rows, 1 << 16);
  float* fill = k.cpu_order ? nullptr : a.Take<float>(fill_rows * kHeadDim);
  std::vector<LayerCache> cache(layers);
  for (int l = 0; l < layers; ++l) {
    if (!new_rows || !MakeLayerCache(a, k.cpu_order, pool_rows, key_rows, seed + 11 * l, fill,
                                     fill_rows, &cache[l]))
      return {};
  }
  int32_t* row_index = nullptr;
  if (prefill) {  // window: earlier tokens of the chunk; then the selected compressed rows
    std::mt19937 rng(seed);
    std::vector<int32_t> index(B * n_rows);
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t e = 0; e < n_rows; ++e) {
        index[b * n_rows + e] = static_cast<int32_t>(
            e < kWindow ? rng() % B : B + (csa ? rng() % compressed : e - kWindow));
      }
    }
    row_index = a.Take<int32_t>(index.size());
    if (!row_index) return {};
    cudaMemcpy(row_index, index.data(), index.size() * sizeof(int32_t), cudaMemcpyHostToDevice);
  }
  if (!streams2 || !expert_buffers || !offsets || !attn_scratch || !split) return {};
  FillFloats(streams, B * flat, seed + 1, 1.0f);
  FillFloats(q, B * qdim, seed + 2, 1.0f);
  // Decode: sequence b at position context - 1 - b, so 1 in m sequences closes a compressor
  // window per step (the steady state; sequence 0 now); prefill: the chunk's own positions.
  std::vector<int64_t> hpos(B), hoff(B + 1);
  for (int b = 0; b < B; ++b) hpos[b] = prefill ? context - B + b : context - 1 - b;
  for (int b = 0; b <= B; ++b) hoff[b] = b * n_rows;
  cudaMemcpy(positions, hpos.data(), B * sizeof(int64_t), cudaMemcpyHostToDevice);
  cudaMemcpy(offsets, hoff.data(), (B + 1) * sizeof(int64_t), cudaMemcpyHostToDevice);

  const int n_up = static_cast<int>(capacity);
  const int max_rows = group_rows;
  const double hc_bytes = 4.0 * kHcMix * flat;
  using L = const LayerWeights&;
  // The kernel choices of `k`, shared by the ops below.
  const auto dense = [=](const Fp8Weight& w, int64_t out_begin, int64_t out, const float* in,
                         float* y, cudaStream_t s) {
    // Above gemv_max_rows the tensor-core GEMM (the GEMV multiplies on CUDA cores).
    if (k.cpu_order || !k.gemm || B <= k.gemv_max_rows)
      return Fp8Rows(w, out_begin, out, in, B, y, s);
    if (const int e = kernels::QuantizeActFp8(in, B, w.in, xq, xs, s)) return e;
    return kernels::Fp8BlockGemm(*k.gemm, w.w + out_begin * w.in,
                                 w.scale_f32 + (out_begin / 128) * kernels::Fp8WeightScaleLd(w.in),
                                 out, w.in, xq, xs, B, y, s);
  };
  const auto bf16 = [=](const Bf16Weight& w, const float* in, float* y, cudaStream_t s) {
    if (k.cpu_order || !k.bf16 || B <= 8) return Bf16Rows(w, in, B, y, s);
    return kernels::Bf16Gemm(*k.bf16, w.w, w.out, w.in, in, B, split, y, s);
  };
  const auto norm = [=](const float* in, const float* weight, int64_t rows, int64_t dim, float* y,
                        cudaStream_t s) {
    return k.cpu_order ? kernels::RmsNorm(in, weight, rows, dim, 1e-6f, y, s)
                       : kernels::RmsNormFast(in, weight, rows, dim, 1e-6f, y, s);
  };
  // The mHC pre-mix and the block's input norm into xn (the device forward's HyperPreNorm: one
  // fused form on the production kernels, with the FP8 round trip the products read).
  const auto hc_pre = [=](const float* fn, const float* base, const float* scale, const float* in,
                          const float* norm_w, cudaStream_t s) {
    const kernels::HyperWeights hw{fn, base, scale};
    if (k.cpu_order) {
      if (const int e =
              kernels::HyperPre(hw, in, B, kHc, kHidden, 1e-6f, 1e-6f, 20, post, comb, x, s))
        return e;
      return kernels::RmsNorm(x, norm_w, B, kHidden, 1e-6f, xn, s);
    }
    return kernels::HyperPreFast(hw, in, B, kHc, kHidden, 1e-6f, 1e-6f, 20, post, comb, x,
                                 hc_scratch, s, norm_w, xn, xn_fp8);
  };
  std::vector<Op> ops;
  auto add = [&](std::string name, double floor, double flops, auto fn) {
    ops.push_back({std::move(name), floor, flops, fn});
  };
  add("mhc_pre_attn", hc_bytes, 2.0 * B * kHcMix * flat, [=](L l, int, cudaStream_t s) {
    return hc_pre(l.hc_attn_fn, l.hc_base, l.hc_scale, streams, l.norm, s);
  });
  const double wq_a = kQLora * kHidden * 1.0, wq_b = qdim * kQLora * 1.0;
  add("wq_a", wq_a, 2.0 * B * wq_a, [=](L l, int, cudaStream_t s) {
    if (const int e = dense(l.wq_a, 0, l.wq_a.out, xn, qlat, s)) return e;
    return norm(qlat, l.norm, B, kQLora, qlat, s);
  });
  add("wq_b", wq_b, 2.0 * B * wq_b, [=](L l, int, cudaStream_t s) {
    if (const int e = dense(l.wq_b, 0, l.wq_b.out, qlat, q, s)) return e;
    if (const int e = norm(q, nullptr, B * kHeads, kHeadDim, q, s)) return e;
    return kernels::Rope(q, B, kHeads, kHeadDim, kRopeDim, l.inv_freq, positions, false, s);
  });
  const double wkv = kHeadDim * kHidden;
  add("wkv", wkv, 2.0 * B * wkv, [=](L l, int, cudaStream_t s) {
    if (const int e = dense(l.wkv, 0, l.wkv.out, xn, kv, s)) return e;
    if (const int e = norm(kv, l.norm, B, kHeadDim, kv, s)) return e;
    if (const int e = kernels::Rope(kv, B, 1, kHeadDim, kRopeDim, l.inv_freq, positions, false, s))
      return e;
    // Into the cache's layout (stage 1 keeps fp32 rows).
    return k.cpu_order ? 0 : kernels::PackKvRows(kv, B, new_rows, s);
  });
  const double cb = 2.0 * (csa ? 4 : 2) * kHeadDim * kHidden;
  add("compressor", cb, cb * B,
      [=](L l, int, cudaStream_t s) { return bf16(l.compressor, xn, comp, s); });
  if (!prefill) {  // a chunk's pooling walks its sequence's tokens in order: a decode-step op
    // Sequences at a window end pool (positions above); states are shared by the copies.
    const kernels::CompressorShape kv_shape{csa ? 4 : 128, static_cast<int>(kHeadDim), csa},
        index_shape{4, static_cast<int>(kIndexDim), true};
    float* ape = a.Take<float>(kv_shape.ratio * kv_shape.proj());
    float* kv_state = a.Take<float>(2 * B * kv_shape.state_floats());
    float* index_state = a.Take<float>(2 * B * index_shape.state_floats());
    float* pooled = a.Take<float>(Bp * kHeadDim);
    int32_t* emitted = a.Take<int32_t>(Bp);
    int64_t* seg_begin = a.Take<int64_t>(B + 1);
    if (!seg_begin) return {};
    FillFloats(ape, kv_shape.ratio * kv_shape.proj(), seed + 5, 1.0f);
    FillFloats(kv_state, 2 * B * kv_shape.state_floats(), seed + 6, 1.0f);
    FillFloats(index_state, 2 * B * index_shape.state_floats(), seed + 8, 1.0f);
    std::vector<int64_t> begin(B + 1);
    for (int b = 0; b <= B; ++b) begin[b] = b;
    cudaMemcpy(seg_begin, begin.data(), begin.size() * sizeof(int64_t), cudaMemcpyHostToDevice);
    add("compressor_pool", 0, 0, [=](L, int, cudaStream_t s) {
      const int64_t p = kv_shape.proj(), ip = index_shape.proj();
      if (const int e = kernels::CompressorPool(
              kv_shape, comp, comp + p, 2 * p, ape, positions, seg_begin, B, nullptr, kv_state,
              kv_state + B * kv_shape.state_floats(), pooled, emitted, s))
        return e;
      if (!csa) return 0;
      return kernels::CompressorPool(
          index_shape, icomp, icomp + ip, 2 * ip, ape, positions, seg_begin, B, nullptr,
          index_state, index_state + B * index_shape.state_floats(), pooled, emitted, s);
    });
  }
  if (csa) {
    const double ib = kIndexHeads * kIndexDim * kQLora + 2.0 * (512 + 64) * kHidden;
    const double iflops = 2.0 * B * (kIndexHeads * kIndexDim * kQLora + (512 + 64) * kHidden);
    add("indexer_proj", ib, iflops, [=](L l, int, cudaStream_t s) {
      if (const int e = dense(l.index_wq_b, 0, l.index_wq_b.out, qlat, iq, s)) return e;
      if (const int e = bf16(l.index_compressor, xn, icomp, s)) return e;
      return bf16(l.index_weights, xn, iw, s);
    });
    add("indexer_scores", key_rows * kIndexKeyBytes, 2.0 * B * n_keys * kIndexHeads * kIndexDim,
        [=](L, int li, cudaStream_t s) {
          if (!k.cpu_order) {
            return kernels::IndexerScoresMma(iq, iw, B, kIndexHeads, cache[li].keys16,
                                             prefill ? 0 : n_keys * kIndexDim, n_keys, scores, s);
          }
          for (int b = 0; b < B; ++b) {
            const int e = kernels::IndexerScores(
                iq + b * kIndexHeads * kIndexDim, iw + b * kIndexHeads, kIndexHeads, kIndexDim,
                cache[li].keys + (prefill ? 0 : b * n_keys * kIndexDim), n_keys,
                scores + b * n_keys, s);
            if (e) return e;
          }
          return 0;
        });
    // The selection itself; the bench's attention reads rows gathered at setup, as many as the
    // top-k picks (the device cache that would take these indices is stage 2's).
    add("indexer_topk", 0, 0, [=](L, int, cudaStream_t s) {
      return kernels::RowTopK(scores, B, n_keys, nullptr, n_keys, kIndexTopK, topk_idx, topk_ws, s);
    });
  }
  add("attention", (prefill ? pool_rows : B * n_rows) * kCacheRowBytes,
      4.0 * B * kHeads * kHeadDim * n_rows, [=](L l, int li, cudaStream_t s) {
        const kernels::RopeArgs out_rope{kHeads, kHeadDim, kRopeDim, l.inv_freq, positions, true};
        const auto mqa = k.mma_attention ? kernels::MqaMmaFp8Rows : kernels::MqaDecodeFp8Rows;
        const int e =
            k.cpu_order ? kernels::SparseAttention(q, cache[li].rows, offsets, B, kHeads, kHeadDim,
                                                   l.sinks, 0.044194f, o, s, n_rows)
                        : mqa(q, cache[li].rows8, row_index, offsets, B, kHeads, kHeadDim, l.sinks,
                              0.044194f, n_rows, max_splits, attn_scratch, o, s, &out_rope, o_fp8);
        if (e || !k.cpu_order) return e;  // production: the inverse rotation in the combine
        return kernels::Rope(o, B, kHeads, kHeadDim, kRopeDim, l.inv_freq, positions, true, s);
      });
  const double wo_a = kOGroups * kOLora * (qdim / kOGroups) * 1.0;
  add("wo_a", wo_a, 2.0 * B * wo_a, [=](L l, int, cudaStream_t s) {
    // Group g's heads are columns [4096 g, 4096 g + 4096) of each token's attention output; its
    // 1,024 outputs are columns [1024 g, 1024 g + 1024) of z, which wo_b reads row by row. Up to
    // 8 rows one grouped GEMV launch beats eight GEMMs with their activation quantisation (H200:
    // 45 against 127 µs at 8 rows).
    const int64_t in = qdim / kOGroups;
    if (B <= 8 || k.cpu_order || !k.gemm) {
      for (int r = 0; r < B; r += 8) {
        const int e = kernels::Fp8BlockGemvGrouped(
            l.wo_a.w, l.wo_a.scale, kOGroups, kOLora, in, o + r * qdim, in, qdim,
            std::min(8, B - r), z + r * kOGroups * kOLora, kOLora, kOGroups * kOLora, s);
        if (e) return e;
      }
      return 0;
    }
    // The GEMM takes contiguous rows: here o and z are read and written group-major, the same
    // bytes and FLOPs (a strided GEMM operand is the stage-2 form).
    for (int g = 0; g < kOGroups; ++g) {
      const int e = dense(l.wo_a, g * kOLora, kOLora, o + g * Bp * in, z + g * Bp * kOLora, s);
      if (e) return e;
    }
    return 0;
  });
  const double wo_b = kHidden * kOGroups * kOLora * 1.0;
  add("wo_b", wo_b, 2.0 * B * wo_b,
      [=](L l, int, cudaStream_t s) { return dense(l.wo_b, 0, l.wo_b.out, z, h, s); });
  add("mhc_post_attn", 0, 0, [=](L, int, cudaStream_t s) {
    return kernels::HyperPost(streams, h, post, comb, B, kHc, kHidden, streams2, s);
  });
  add("mhc_pre_ffn", hc_bytes, 2.0 * B * kHcMix * flat, [=](L l, int, cudaStream_t s) {
    return hc_pre(l.hc_ffn_fn, l.hc_base, l.hc_scale, streams2, l.norm, s);
  });
  const double gb = 2.0 * kExperts * kHidden;
  add("gate", gb, gb * B, [=](L l, int, cudaStream_t s) { return bf16(l.gate, xn, logits, s); });
  const double sb = 3.0 * kMoeInter * kHidden;
  add("shared_expert", sb, 2.0 * B * sb, [=](L l, int, cudaStream_t s) {
    if (!k.cpu_order && B <= std::min(8, k.gemv_max_rows)) {  // w1 and w3 in one launch
      const kernels::Fp8GemvProduct both[2] = {{l.shared_w1.w, l.shared_w1.scale, kMoeInter, sg},
                                               {l.shared_w3.w, l.shared_w3.scale, kMoeInter, su}};
      if (const int e = kernels::Fp8BlockGemvMulti(both, 2, kHidden, xn, B, s)) return e;
    } else {
      if (const int e = dense(l.shared_w1, 0, l.shared_w1.out, xn, sg, s)) return e;
      if (const int e = dense(l.shared_w3, 0, l.shared_w3.out, xn, su, s)) return e;
    }
    if (const int e = kernels::SwiGlu(sg, su, B * kMoeInter, 10.0f, sa, s)) return e;
    return dense(l.shared_w2, 0, l.shared_w2.out, sa, hs, s);
  });
  add("router", 0, 0, [=](L, int, cudaStream_t s) {
    if (B == 1 && group_rows == 1) {  // the device forward's one-token form: groups in one launch
      return kernels::RouteOneToken(route_logits, route_bias, nullptr, nullptr, rp, route_e,
                                    route_w, d_up, d_down, n_live, s);
    }
    if (const int e = kernels::RouteTokens(route_logits, route_bias, nullptr, nullptr, B, rp,
                                           route_e, route_w, s))
      return e;
    return kernels::BuildExpertGroups(route_e, pairs, kTopK, kExperts, group_rows, d_up, d_down,
                                      n_live, route_rank, s, align);
  });
  const double eb = distinct * kExpertBytes, ef = 2.0 * pairs * 3 * kMoeInter * kHidden;
  ex.batch = B;
  ex.cuda_core = cuda_core;
  ex.cpu_order = k.cpu_order;
  ex.kind = k.experts;
  ex.max_rows = max_rows;
  ex.up = d_up;
  ex.down = d_down;
  ex.n_groups = n_up;
  ex.n_live = n_live;
  ex.xn = xn;
  ex.xq = xq;
  ex.xs = xs;
  ex.xq_rows = Bp;
  add("routed_experts", eb, ef,
      [=](L l, int, cudaStream_t s) { return LaunchRoutedExperts(ex, l, s); });
  if (k.cpu_order) {
    add("combine", 0, 0, [=](L, int, cudaStream_t s) {
      return kernels::CombineExperts(ex.out, route_e, route_w, hs, B, kTopK, kHidden, h, s);
    });
    add("mhc_post_ffn", 0, 0, [=](L, int, cudaStream_t s) {
      return kernels::HyperPost(streams2, h, post, comb, B, kHc, kHidden, streams, s);
    });
  } else {  // the device forward's form: the combine straight into the mHC post
    add("combine_mhc_post_ffn", 0, 0, [=](L, int, cudaStream_t s) {
      const kernels::HyperPostArgs args{streams2, post, comb, kHc, streams};
      return kernels::CombineExpertsPost(ex.out, route_e, route_w, hs, B, kTopK, kHidden, args, s);
    });
  }
  return ops;
}

}  // namespace deepinfer::bench
