#include "tools/model/perturbed_backend.h"

#include <cmath>
#include <random>

namespace deepinfer {
namespace {

class PerturbedBackend final : public Backend {
 public:
  PerturbedBackend(std::unique_ptr<Backend> inner, uint64_t seed)
      : inner_(std::move(inner)), rng_(seed) {}

  const char* name() const override { return "perturbed"; }
  Status TakeError() override { return inner_->TakeError(); }

  void LinearRows(const LinearWeight& w, int64_t out_begin, int64_t n_out, const float* x,
                  int64_t rows, float* y, bool quantize_act) override {
    inner_->LinearRows(w, out_begin, n_out, x, rows, y, quantize_act);
    Nudge(y, rows * n_out);
  }
  void Embed(const LinearWeight& table, const int32_t* tokens, int64_t n, float* out) override {
    inner_->Embed(table, tokens, n, out);
  }
  void RmsNorm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps,
               float* y) override {
    inner_->RmsNorm(x, weight, rows, dim, eps, y);
  }
  void Rope(float* x, int64_t rows, int heads, int head_dim, const RopeTable& table,
            const int64_t* positions, bool inverse) override {
    inner_->Rope(x, rows, heads, head_dim, table, positions, inverse);
  }
  void HyperPre(const HyperConnWeights& w, const float* streams, int64_t rows, int n, int64_t dim,
                float norm_eps, float hc_eps, int iters, float* post, float* comb,
                float* collapsed) override {
    inner_->HyperPre(w, streams, rows, n, dim, norm_eps, hc_eps, iters, post, comb, collapsed);
  }
  void HyperPost(const float* streams, const float* y, const float* post, const float* comb,
                 int64_t rows, int n, int64_t dim, float* out) override {
    inner_->HyperPost(streams, y, post, comb, rows, n, dim, out);
  }
  void HyperHead(const HyperHeadWeights& w, const float* streams, int64_t rows, int n, int64_t dim,
                 float norm_eps, float hc_eps, float* out) override {
    inner_->HyperHead(w, streams, rows, n, dim, norm_eps, hc_eps, out);
  }
  void SparseAttention(const float* q, const AttentionQuery* queries, int64_t n_queries, int heads,
                       int head_dim, const float* sinks, float scale, float* o) override {
    inner_->SparseAttention(q, queries, n_queries, heads, head_dim, sinks, scale, o);
    Nudge(o, n_queries * heads * head_dim);
  }
  void IndexerScores(const float* q, const float* w, int heads, int head_dim, const float* keys,
                     int64_t n_keys, float* out) override {
    inner_->IndexerScores(q, w, heads, head_dim, keys, n_keys, out);
  }
  void SwiGlu(const float* gate, const float* up, int64_t n, float limit, float* out) override {
    inner_->SwiGlu(gate, up, n, limit, out);
  }

 private:
  void Nudge(float* v, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      if ((rng_() & 1) != 0) {
        v[i] = std::nextafter(v[i], INFINITY);
      } else {
        v[i] = std::nextafter(v[i], -INFINITY);
      }
    }
  }

  std::unique_ptr<Backend> inner_;
  std::mt19937_64 rng_;
};

}  // namespace

std::unique_ptr<Backend> PerturbProducts(std::unique_ptr<Backend> inner, uint64_t seed) {
  return std::make_unique<PerturbedBackend>(std::move(inner), seed);
}

}  // namespace deepinfer
