// V4 attention: Q/KV projections with partial RoPE, the sliding-window ring, the compressors
// (CSA overlapping windows, HCA plain windows), the lightning indexer's top-k, sparse attention
// with sinks, inverse RoPE and the grouped low-rank output projection.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/model/compressor_pool.h"
#include "engine/model/model.h"
#include "engine/model/quant.h"
#include "engine/model/routing.h"
#include "kernels/exact_math.h"

namespace deepinfer {

namespace {

// Rounding of a finished KV row in reference numerics: FP8 QDQ of the non-RoPE part in 64s, and
// the RoPE part to bf16, as DeepSeek's inference code and the 584-byte cache row hold it
// (docs/gpu.md, "Cache row").
void QdqKvRow(float* row, int head_dim, int rope_dim) {
  QdqFp8Blocks(row, head_dim - rope_dim, 64, 1e-4f);
  for (int i = head_dim - rope_dim; i < head_dim; ++i) row[i] = Bf16ToF32(F32ToBf16(row[i]));
}

// Rounding of an indexer query head or key in reference numerics: Hadamard, then FP4 QDQ in 32s.
void QdqIndexerRow(float* row, int dim) {
  HadamardTransform(row, dim);
  QdqFp4Blocks(row, dim, 32);
}

}  // namespace

void Model::Compress(const CompressorWeights& w, CompressorState& st, const float* x,
                     const int64_t* pos, int64_t T, const RopeTable& rope, bool indexer,
                     PagedRows& rows) {
  const int m = w.ratio, width = w.width, proj = st.proj;
  std::vector<float> kv(T * proj), gate(T * proj);
  be_.Linear(w.wkv, x, T, kv.data(), QuantizeActs(w.wkv));
  be_.Linear(w.wgate, x, T, gate.data(), QuantizeActs(w.wgate));
  std::vector<float> pooled(width), normed(width), scratch;
  for (int64_t t = 0; t < T; ++t) {
    if (!CompressorPoolToken(w, st, &kv[t * proj], &gate[t * proj], pos[t], pooled.data(), scratch))
      continue;
    be_.RmsNorm(pooled.data(), w.norm.data(), 1, width, static_cast<float>(cfg_.rms_norm_eps),
                normed.data());
    const int64_t first = pos[t] + 1 - m;
    be_.Rope(normed.data(), 1, 1, width, rope, &first, false);
    if (numerics_ == Numerics::kReference) {
      if (indexer)
        QdqIndexerRow(normed.data(), width);
      else
        QdqKvRow(normed.data(), width, rope.rope_dim);
    }
    // A row already stored (a sequence resumed by replaying its tail keeps the rows it had) is
    // not emitted again: the stored one stands.
    if ((pos[t] + 1) / m > rows.size()) rows.Append(normed.data());
  }
}

void Model::SelectCompressed(const AttentionWeights& a, const LayerCache& cache,
                             const RopeTable& rope, const float* x, const float* q_residual,
                             const int64_t* pos, int64_t T,
                             std::span<std::vector<int32_t>> selected) {
  const int heads = cfg_.index_n_heads, dim = cfg_.index_head_dim;
  const int m = a.index_compressor.ratio;
  std::vector<float> q(T * heads * dim), w(T * heads);
  be_.Linear(a.index_wq_b, q_residual, T, q.data(), QuantizeActs(a.index_wq_b));
  be_.Rope(q.data(), T, heads, dim, rope, pos, false);
  if (numerics_ == Numerics::kReference) {
    for (int64_t r = 0; r < T * heads; ++r) QdqIndexerRow(&q[r * dim], dim);
  }
  be_.Linear(a.index_weights_proj, x, T, w.data(), QuantizeActs(a.index_weights_proj));
  const float scale =
      1.0f / (std::sqrt(static_cast<float>(dim)) * std::sqrt(static_cast<float>(heads)));
  for (float& v : w) v *= scale;
  const int64_t n_keys = cache.index_keys.size();
  std::vector<float> scores;
  std::vector<int32_t> order;
  for (int64_t t = 0; t < T; ++t) {
    const int64_t visible = std::min<int64_t>((pos[t] + 1) / m, n_keys);
    scores.resize(visible);
    // Keys lie in pool blocks; each key's score is computed on its own, so block by block
    // gives the same scores as one contiguous call.
    cache.index_keys.ForEachRun(visible, [&](int64_t first, const float* keys, int64_t count) {
      be_.IndexerScores(&q[t * heads * dim], &w[t * heads], heads, dim, keys, count,
                        &scores[static_cast<size_t>(first)]);
    });
    selected[t].resize(std::min<int64_t>(cfg_.index_topk, visible));
    TopKIndices(scores.data(), visible, cfg_.index_topk, selected[t].data(), order);
  }
}

void Model::Attention(const LayerWeights& L, std::span<const Segment> segs, const RopeTable& rope,
                      const float* x, const int64_t* pos, int64_t T, float* out) {
  const AttentionWeights& a = L.attn;
  const int H = cfg_.num_heads, D = cfg_.head_dim, r = cfg_.rope_dim;
  const int64_t d = cfg_.hidden_size;
  const int64_t qr = cfg_.q_lora_rank;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  std::vector<float> q_lat(T * qr), q_res(T * qr), q(T * H * D), kv_lat(T * D), kv(T * D);
  be_.Linear(a.wq_a, x, T, q_lat.data(), QuantizeActs(a.wq_a));
  be_.RmsNorm(q_lat.data(), a.q_norm.data(), T, qr, eps, q_res.data());
  be_.Linear(a.wq_b, q_res.data(), T, q.data(), QuantizeActs(a.wq_b));
  be_.RmsNorm(q.data(), nullptr, T * H, D, eps, q.data());
  be_.Rope(q.data(), T, H, D, rope, pos, false);
  be_.Linear(a.wkv, x, T, kv_lat.data(), QuantizeActs(a.wkv));
  be_.RmsNorm(kv_lat.data(), a.kv_norm.data(), T, D, eps, kv.data());
  be_.Rope(kv.data(), T, 1, D, rope, pos, false);
  if (numerics_ == Numerics::kReference) {
    for (int64_t t = 0; t < T; ++t) QdqKvRow(&kv[t * D], D, r);
  }

  // Per sequence: its compressors and indexer, then the candidate rows of each of its queries —
  // its window (from this step or its ring), then its compressed rows.
  std::vector<std::vector<int32_t>> selected(T);
  std::vector<std::vector<const float*>> rows(T);
  std::vector<AttentionQuery> queries(T);
  const int m = L.ratio;
  for (const Segment& sg : segs) {
    LayerCache& cache = *sg.cache;
    const int W = cache.window;
    const float* xs = x + sg.begin * d;
    const int64_t* ps = pos + sg.begin;
    if (a.has_compressor)
      Compress(a.compressor, cache.comp, xs, ps, sg.count, rope, false, cache.rows);
    if (a.has_indexer) {
      Compress(a.index_compressor, cache.index_comp, xs, ps, sg.count, rope, true,
               cache.index_keys);
      SelectCompressed(a, cache, rope, xs, &q_res[sg.begin * qr], ps, sg.count,
                       std::span<std::vector<int32_t>>(&selected[sg.begin], sg.count));
    }
    const int64_t p0 = ps[0];
    for (int64_t t = sg.begin; t < sg.begin + sg.count; ++t) {
      const int64_t P = pos[t];
      // After an approximate resume the ring lacks the positions before ring_from: the window
      // is truncated there (rows of this step are always present).
      const int64_t first = std::max({int64_t{0}, P - W + 1, std::min(cache.ring_from, p0)});
      for (int64_t s = first; s <= P; ++s) {
        rows[t].push_back(s >= p0 ? &kv[(sg.begin + s - p0) * D] : &cache.ring[(s % W) * D]);
      }
      if (L.type == AttnType::kHca) {
        const int64_t visible = std::min<int64_t>((P + 1) / m, cache.n_rows());
        for (int64_t j = 0; j < visible; ++j) rows[t].push_back(cache.rows.row(j));
      } else if (L.type == AttnType::kCsa) {
        for (int32_t j : selected[t]) rows[t].push_back(cache.rows.row(j));
      }
      queries[t] = {rows[t].data(), static_cast<int>(rows[t].size())};
    }
  }
  std::vector<float> o(T * H * D);
  be_.SparseAttention(q.data(), queries.data(), T, H, D, a.attn_sink.data(),
                      1.0f / std::sqrt(static_cast<float>(D)), o.data());
  // K = V carries RoPE on its tail; rotating the output back makes it relative to the query.
  be_.Rope(o.data(), T, H, D, rope, pos, true);

  for (const Segment& sg : segs) {
    const int W = sg.cache->window;
    for (int64_t t = std::max<int64_t>(sg.begin, sg.begin + sg.count - W); t < sg.begin + sg.count;
         ++t) {
      std::memcpy(&sg.cache->ring[(pos[t] % W) * D], &kv[t * D], D * sizeof(float));
    }
  }

  // Grouped low-rank output: group g of heads goes through rows [g*rank, (g+1)*rank) of wo_a.
  const int G = cfg_.o_groups;
  const int64_t rank = cfg_.o_lora_rank, group_in = static_cast<int64_t>(H / G) * D;
  std::vector<float> group_x(T * group_in), group_z(T * rank), z(T * G * rank);
  for (int g = 0; g < G; ++g) {
    for (int64_t t = 0; t < T; ++t) {
      std::memcpy(&group_x[t * group_in], &o[t * H * D + g * group_in], group_in * sizeof(float));
    }
    be_.LinearRows(a.wo_a, g * rank, rank, group_x.data(), T, group_z.data(), QuantizeActs(a.wo_a));
    for (int64_t t = 0; t < T; ++t) {
      std::memcpy(&z[(t * G + g) * rank], &group_z[t * rank], rank * sizeof(float));
    }
  }
  be_.Linear(a.wo_b, z.data(), T, out, QuantizeActs(a.wo_b));
}

}  // namespace deepinfer
