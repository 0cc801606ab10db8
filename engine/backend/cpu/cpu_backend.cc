// The exact CPU backend: fp32 math, weights dequantised row by row from their stored formats.
#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/common/thread_pool.h"
#include "engine/model/quant.h"
#include "kernels/exact_math.h"

namespace deepinfer {
namespace {

// The sums and exponentials are kernels/exact_math.h's (OrderedDot, ExpF, SigmoidF), which the
// CUDA kernels share bit for bit.

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int threads) : pool_(threads) {}
  const char* name() const override { return "cpu"; }

  void LinearRows(const LinearWeight& w, int64_t out_begin, int64_t out, const float* x,
                  int64_t rows, float* y, bool quantize_act) override {
    const int64_t in = w.in;
    const float* xs = x;
    std::vector<float> xq;
    if (quantize_act) {
      xq.assign(x, x + rows * in);
      for (int64_t r = 0; r < rows; ++r) QdqFp8Blocks(xq.data() + r * in, in, 128, 1e-4f);
      xs = xq.data();
    }
    auto body = [&](int64_t begin, int64_t end) {
      std::vector<float> wrow(in);
      for (int64_t o = begin; o < end; ++o) {
        DequantizeRow(w, out_begin + o, wrow.data());
        for (int64_t r = 0; r < rows; ++r)
          y[r * out + o] = OrderedDot(xs + r * in, wrow.data(), in);
      }
    };
    // Waking workers costs more than a small product; the split never changes the result.
    if (rows * in * out < (1 << 18))
      body(0, out);
    else
      pool_.ParallelFor(out, body);
  }

  void Embed(const LinearWeight& table, const int32_t* tokens, int64_t n, float* out) override {
    for (int64_t i = 0; i < n; ++i) DequantizeRow(table, tokens[i], out + i * table.in);
  }

  void RmsNorm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps,
               float* y) override {
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * dim;
      float* yr = y + r * dim;
      const float inv = 1.0f / std::sqrt(OrderedDot(xr, xr, dim) / static_cast<float>(dim) + eps);
      for (int64_t i = 0; i < dim; ++i) yr[i] = xr[i] * inv * (weight ? weight[i] : 1.0f);
    }
  }

  void Rope(float* x, int64_t rows, int heads, int head_dim, const RopeTable& table,
            const int64_t* positions, bool inverse) override {
    for (int64_t r = 0; r < rows; ++r) {
      for (int h = 0; h < heads; ++h) {
        float* head = x + (r * heads + h) * head_dim;
        table.Apply(head + head_dim - table.rope_dim, positions[r], inverse);
      }
    }
  }

  void HyperPre(const HyperConnWeights& w, const float* streams, int64_t rows, int n, int64_t dim,
                float norm_eps, float hc_eps, int iters, float* post, float* comb,
                float* collapsed) override {
    const int64_t flat = n * dim;
    const int mix = (2 + n) * n;
    std::vector<float> normed(flat), m(mix), pre(n);
    for (int64_t r = 0; r < rows; ++r) {
      const float* X = streams + r * flat;
      RmsNorm(X, nullptr, 1, flat, norm_eps, normed.data());
      for (int k = 0; k < mix; ++k) m[k] = OrderedDot(w.fn.data() + k * flat, normed.data(), flat);
      float* po = post + r * n;
      float* C = comb + r * n * n;
      for (int k = 0; k < n; ++k) {
        pre[k] = SigmoidF(m[k] * w.scale[0] + w.base[k]) + hc_eps;
        po[k] = 2.0f * SigmoidF(m[n + k] * w.scale[1] + w.base[n + k]);
      }
      for (int i = 0; i < n; ++i) {  // row softmax
        float* row = C + i * n;
        float mx = -INFINITY;
        for (int j = 0; j < n; ++j) {
          row[j] = m[2 * n + i * n + j] * w.scale[2] + w.base[2 * n + i * n + j];
          mx = std::max(mx, row[j]);
        }
        float s = 0;
        for (int j = 0; j < n; ++j) s += (row[j] = ExpF(row[j] - mx));
        for (int j = 0; j < n; ++j) row[j] = row[j] / s + hc_eps;
      }
      NormalizeColumns(C, n, hc_eps);
      for (int it = 1; it < iters; ++it) {
        for (int i = 0; i < n; ++i) {
          float s = 0;
          for (int j = 0; j < n; ++j) s += C[i * n + j];
          for (int j = 0; j < n; ++j) C[i * n + j] /= s + hc_eps;
        }
        NormalizeColumns(C, n, hc_eps);
      }
      float* out = collapsed + r * dim;
      for (int64_t c = 0; c < dim; ++c) {
        float s = 0;
        for (int k = 0; k < n; ++k) s += pre[k] * X[k * dim + c];
        out[c] = s;
      }
    }
  }

  void HyperPost(const float* streams, const float* y, const float* post, const float* comb,
                 int64_t rows, int n, int64_t dim, float* out) override {
    for (int64_t r = 0; r < rows; ++r) {
      const float* X = streams + r * n * dim;
      const float* C = comb + r * n * n;
      for (int j = 0; j < n; ++j) {
        float* o = out + (r * n + j) * dim;
        for (int64_t c = 0; c < dim; ++c) {
          float s = post[r * n + j] * y[r * dim + c];
          for (int i = 0; i < n; ++i) s += C[i * n + j] * X[i * dim + c];
          o[c] = s;
        }
      }
    }
  }

  void HyperHead(const HyperHeadWeights& w, const float* streams, int64_t rows, int n, int64_t dim,
                 float norm_eps, float hc_eps, float* out) override {
    const int64_t flat = n * dim;
    std::vector<float> normed(flat), pre(n);
    for (int64_t r = 0; r < rows; ++r) {
      const float* X = streams + r * flat;
      RmsNorm(X, nullptr, 1, flat, norm_eps, normed.data());
      for (int k = 0; k < n; ++k) {
        const float m = OrderedDot(w.fn.data() + k * flat, normed.data(), flat);
        pre[k] = SigmoidF(m * w.scale[0] + w.base[k]) + hc_eps;
      }
      for (int64_t c = 0; c < dim; ++c) {
        float s = 0;
        for (int k = 0; k < n; ++k) s += pre[k] * X[k * dim + c];
        out[r * dim + c] = s;
      }
    }
  }

  void SparseAttention(const float* q, const AttentionQuery* queries, int64_t n_queries, int heads,
                       int head_dim, const float* sinks, float scale, float* o) override {
    pool_.ParallelFor(n_queries * heads, [&](int64_t begin, int64_t end) {
      std::vector<float> p;
      for (int64_t idx = begin; idx < end; ++idx) {
        const int64_t t = idx / heads;
        const int h = static_cast<int>(idx % heads);
        const AttentionQuery& qu = queries[t];
        const float* qh = q + idx * head_dim;
        p.resize(qu.n_rows);
        float mx = sinks[h];
        for (int e = 0; e < qu.n_rows; ++e) {
          p[e] = OrderedDot(qh, qu.rows[e], head_dim) * scale;
          mx = std::max(mx, p[e]);
        }
        float denom = ExpF(sinks[h] - mx);
        for (int e = 0; e < qu.n_rows; ++e) denom += (p[e] = ExpF(p[e] - mx));
        float* oh = o + idx * head_dim;
        std::fill(oh, oh + head_dim, 0.0f);
        for (int e = 0; e < qu.n_rows; ++e) {
          const float pe = p[e] / denom;
          const float* v = qu.rows[e];
          for (int c = 0; c < head_dim; ++c) oh[c] += pe * v[c];
        }
      }
    });
  }

  void IndexerScores(const float* q, const float* w, int heads, int head_dim, const float* keys,
                     int64_t n_keys, float* out) override {
    for (int64_t j = 0; j < n_keys; ++j) {
      float s = 0;
      for (int h = 0; h < heads; ++h) {
        s += w[h] * std::max(OrderedDot(q + h * head_dim, keys + j * head_dim, head_dim), 0.0f);
      }
      out[j] = s;
    }
  }

  void SwiGlu(const float* gate, const float* up, int64_t n, float limit, float* out) override {
    for (int64_t i = 0; i < n; ++i) out[i] = SwiGluF(gate[i], up[i], limit);
  }

 private:
  static void NormalizeColumns(float* C, int n, float eps) {
    for (int j = 0; j < n; ++j) {
      float s = 0;
      for (int i = 0; i < n; ++i) s += C[i * n + j];
      for (int i = 0; i < n; ++i) C[i * n + j] /= s + eps;
    }
  }

  ThreadPool pool_;
};

}  // namespace

std::unique_ptr<Backend> MakeCpuBackend(int threads) {
  return std::make_unique<CpuBackend>(threads);
}

}  // namespace deepinfer
