// The Backend interface: the ops the V4 forward is written against. The CPU backend is the exact
// reference (fp32 math); the CUDA backend implements the same ops on the GPU. Pointers are in the
// backend's memory space (host memory for the CPU backend).
#pragma once

#include <cstdint>
#include <memory>

#include "engine/common/status.h"
#include "engine/model/rope.h"
#include "engine/model/weights.h"

namespace deepinfer {

/// One query row of sparse attention: the key/value rows it may attend to (K = V in V4).
struct AttentionQuery {
  const float* const* rows = nullptr;
  int n_rows = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  /// The first device fault since the last call (ops return nothing; a failed op leaves its
  /// outputs undefined and the step that ran it fails with this). Always OK on the CPU.
  virtual Status TakeError() { return Status::Ok(); }

  /// y[rows, n_out] = x[rows, w.in] * W[out_begin : out_begin + n_out]^T in fp32. With
  /// quantize_act, each 128-value block of a row of x is first rounded through FP8 e4m3 with a
  /// power-of-two scale (reference numerics).
  virtual void LinearRows(const LinearWeight& w, int64_t out_begin, int64_t n_out, const float* x,
                          int64_t rows, float* y, bool quantize_act) = 0;
  void Linear(const LinearWeight& w, const float* x, int64_t rows, float* y, bool quantize_act) {
    LinearRows(w, 0, w.out, x, rows, y, quantize_act);
  }
  /// out[i] = table[tokens[i]] as fp32.
  virtual void Embed(const LinearWeight& table, const int32_t* tokens, int64_t n, float* out) = 0;
  /// y = x / sqrt(mean(x^2) + eps) * weight, per row; weight may be null (unweighted).
  virtual void RmsNorm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps,
                       float* y) = 0;
  /// Rotates the trailing table.rope_dim channels of each of `heads` heads of every row.
  virtual void Rope(float* x, int64_t rows, int heads, int head_dim, const RopeTable& table,
                    const int64_t* positions, bool inverse) = 0;
  /// mHC collapse: per row, the pre/post/comb weights (Sinkhorn) and the collapsed input.
  virtual void HyperPre(const HyperConnWeights& w, const float* streams, int64_t rows, int n,
                        int64_t dim, float norm_eps, float hc_eps, int sinkhorn_iters, float* post,
                        float* comb, float* collapsed) = 0;
  /// mHC expand: out[j] = post[j] * y + sum_i comb[i][j] * streams[i], per row.
  virtual void HyperPost(const float* streams, const float* y, const float* post, const float* comb,
                         int64_t rows, int n, int64_t dim, float* out) = 0;
  /// Final mHC collapse before the model norm (sigmoid weights, no Sinkhorn).
  virtual void HyperHead(const HyperHeadWeights& w, const float* streams, int64_t rows, int n,
                         int64_t dim, float norm_eps, float hc_eps, float* out) = 0;
  /// o[t, h] = softmax over (rows of query t, plus the sink of head h) applied to those rows.
  virtual void SparseAttention(const float* q, const AttentionQuery* queries, int64_t n_queries,
                               int heads, int head_dim, const float* sinks, float scale,
                               float* o) = 0;
  /// Lightning-indexer scores: out[j] = sum_h w[h] * relu(q[h] . keys[j]) for one query.
  virtual void IndexerScores(const float* q, const float* w, int heads, int head_dim,
                             const float* keys, int64_t n_keys, float* out) = 0;
  /// out = silu(min(gate, limit)) * clamp(up, -limit, limit); limit <= 0 disables clamping.
  virtual void SwiGlu(const float* gate, const float* up, int64_t n, float limit, float* out) = 0;
};

/// The exact fp32 CPU backend with `threads` worker threads (including the caller).
std::unique_ptr<Backend> MakeCpuBackend(int threads);

}  // namespace deepinfer
