// The element-wise, normalisation, mHC and attention ops of the V4 forward on the GPU, one launcher
// per Backend op (engine/backend/backend.h has the math). Device pointers; `stream` is a
// cudaStream_t as void*; each returns the CUDA error code of the launch (0 on success).
#pragma once

#include <cstdint>

namespace deepinfer::kernels {

/// y[r, o] = x[r] . w[o] for fp32 rows, summed exactly as the CPU backend sums (eight running
/// partial sums, then pairwise, no fused multiply-add), so results are bit-identical to it: the
/// reference numerics round activations through FP8 after these, where any difference in the last
/// bit can move a value one FP8 step. One thread per output; slow, for stage 1.
int DotRowsCpuOrder(const float* w, const float* x, int64_t rows, int64_t n_out, int64_t in,
                    float* y, void* stream);
/// y = x / sqrt(mean(x^2) + eps) * weight per row; weight may be null. The sum of squares is
/// taken in the CPU backend's order (see DotRowsCpuOrder), so y is bit-identical to it.
int RmsNorm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps, float* y,
            void* stream);
/// Rotates the trailing rope_dim channels of every head; inv_freq has rope_dim / 2 entries.
int Rope(float* x, int64_t rows, int heads, int head_dim, int rope_dim, const float* inv_freq,
         const int64_t* positions, bool inverse, void* stream);
/// out = silu(min(gate, limit)) * clamp(up, -limit, limit); limit <= 0: no clamping.
int SwiGlu(const float* gate, const float* up, int64_t n, float limit, float* out, void* stream);

/// mHC weights on the device: fn [mix, n * dim], base [mix], scale [3] (HyperPre) or [1].
struct HyperWeights {
  const float* fn;
  const float* base;
  const float* scale;
};
int HyperPre(HyperWeights w, const float* streams, int64_t rows, int n, int64_t dim, float norm_eps,
             float hc_eps, int sinkhorn_iters, float* post, float* comb, float* collapsed,
             void* stream);
int HyperPost(const float* streams, const float* y, const float* post, const float* comb,
              int64_t rows, int n, int64_t dim, float* out, void* stream);
int HyperHead(HyperWeights w, const float* streams, int64_t rows, int n, int64_t dim,
              float norm_eps, float hc_eps, float* out, void* stream);

/// Query t attends to rows[offsets[t] .. offsets[t + 1]) of `rows` (each head_dim floats, gathered
/// contiguously) plus the sink of each head. max_rows: the most rows of any query (at most 51,200:
/// the scores of one query live in shared memory).
int SparseAttention(const float* q, const float* rows, const int64_t* offsets, int64_t n_queries,
                    int heads, int head_dim, const float* sinks, float scale, float* o,
                    void* stream, int64_t max_rows);
/// out[j] = sum_h w[h] * relu(q[h] . keys[j]).
int IndexerScores(const float* q, const float* w, int heads, int head_dim, const float* keys,
                  int64_t n_keys, float* out, void* stream);

}  // namespace deepinfer::kernels
