// The CPU backend against double-precision re-implementations of reference §2.2-2.4 and hand
// examples. Every op runs with 1 and 2 threads and must give bit-identical results.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/model/quant.h"
#include "tests/unit/test_util.h"

namespace deepinfer {
namespace {

std::vector<float> Rand(size_t n, float lo, float hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

double RefE4M3(uint8_t b) {
  const int e = (b >> 3) & 15, m = b & 7;
  const double v = e == 0 ? m / 512.0 : (1 + m / 8.0) * std::ldexp(1.0, e - 7);
  return (b & 0x80) ? -v : v;
}

double Sig(double x) { return 1 / (1 + std::exp(-x)); }
double Silu(double x) { return x * Sig(x); }

void ExpectClose(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << "index " << i;
  }
}

class CpuBackendTest : public ::testing::Test {
 protected:
  // Runs `op(backend, out)` with 1 and 2 threads; outputs must match bit for bit.
  template <typename F>
  std::vector<float> Both(size_t n, F op) {
    std::vector<float> y1(n, NAN), y2(n, NAN);
    op(*b1_, y1.data());
    op(*b2_, y2.data());
    EXPECT_EQ(std::memcmp(y1.data(), y2.data(), n * 4), 0) << "1 vs 2 threads differ";
    return y1;
  }
  std::unique_ptr<Backend> b1_ = MakeCpuBackend(1), b2_ = MakeCpuBackend(2);
};

// y[r][o] = sum_i x[r][i] * W[o][i] in double, W given densely.
std::vector<double> RefLinear(const std::vector<double>& W, const std::vector<float>& x, int rows,
                              int out, int in) {
  std::vector<double> y(rows * out);
  for (int r = 0; r < rows; ++r) {
    for (int o = 0; o < out; ++o) {
      double s = 0;
      for (int i = 0; i < in; ++i) s += double{x[r * in + i]} * W[o * in + i];
      y[r * out + o] = s;
    }
  }
  return y;
}

TEST_F(CpuBackendTest, LinearF32) {
  // Big enough (rows * in * out >= 2^18) for the backend to split it across threads; in = 300
  // is not a multiple of the 8-wide dot.
  const int out = 300, in = 300, rows = 3;
  const std::vector<float> w = Rand(out * in, -1, 1, 1), x = Rand(rows * in, -1, 1, 2);
  LinearWeight lw;
  lw.out = out;
  lw.in = in;
  lw.data = reinterpret_cast<const uint8_t*>(w.data());
  auto y = Both(rows * out, [&](Backend& b, float* o) { b.Linear(lw, x.data(), rows, o, false); });
  ExpectClose(y, RefLinear(std::vector<double>(w.begin(), w.end()), x, rows, out, in), 1e-5);
}

TEST_F(CpuBackendTest, LinearFp8RowsAndActQuant) {
  const int out = 130, in = 200, rows = 12;  // threaded: 12 * 200 * 130 >= 2^18
  std::vector<uint8_t> codes(out * in);
  std::mt19937 rng(3);
  for (auto& c : codes) {
    c = static_cast<uint8_t>(rng() % 0x7F);  // 0x00..0x7E, no NaN
    if (rng() % 2) c |= 0x80;
  }
  const std::vector<uint8_t> scale = {120, 125, 127, 129};  // [2, 2] ue8m0
  const LinearWeight lw = testing::Fp8BlockView(out, in, codes.data(), scale.data());
  std::vector<double> W(out * in);
  for (int o = 0; o < out; ++o) {
    for (int i = 0; i < in; ++i) {
      W[o * in + i] =
          RefE4M3(codes[o * in + i]) * std::ldexp(1.0, scale[o / 128 * 2 + i / 128] - 127);
    }
  }
  std::vector<float> x = Rand(rows * in, -1, 1, 4);
  for (int i = 128; i < 200; ++i) x[i] *= 50;  // row 0: second block of another magnitude
  const std::vector<float> x_orig = x;
  auto full =
      Both(rows * out, [&](Backend& b, float* o) { b.Linear(lw, x.data(), rows, o, false); });
  const std::vector<double> ref = RefLinear(W, x, rows, out, in);
  double mag = 0;
  for (double v : ref) mag = std::max(mag, std::fabs(v));
  for (size_t k = 0; k < ref.size(); ++k) EXPECT_NEAR(full[k], ref[k], 1e-5 * mag) << k;

  // A slice of output rows (crossing the 128-row scale boundary), written densely.
  auto part = Both(rows * 20, [&](Backend& b, float* o) {
    b.LinearRows(lw, 100, 20, x.data(), rows, o, false);
  });
  for (int r = 0; r < rows; ++r) {
    for (int o = 0; o < 20; ++o) EXPECT_EQ(part[r * 20 + o], full[r * out + 100 + o]) << r << o;
  }

  // quantize_act: each 128-value block of each row QDQ'd through e4m3, x left untouched.
  std::vector<float> xq = x;
  for (int r = 0; r < rows; ++r) QdqFp8Blocks(xq.data() + r * in, in, 128, 1e-4f);
  auto want =
      Both(rows * out, [&](Backend& b, float* o) { b.Linear(lw, xq.data(), rows, o, false); });
  auto got = Both(rows * out, [&](Backend& b, float* o) { b.Linear(lw, x.data(), rows, o, true); });
  EXPECT_EQ(got, want);
  EXPECT_EQ(x, x_orig);
  EXPECT_NE(got, full);
}

TEST_F(CpuBackendTest, RmsNorm) {
  const int rows = 3, dim = 37;
  std::vector<float> x = Rand(rows * dim, -3, 3, 5), w = Rand(dim, 0.5f, 1.5f, 6);
  for (int i = 0; i < dim; ++i) x[2 * dim + i] = 1e-3f;  // eps matters: 1e-3/sqrt(2e-6)
  for (bool weighted : {true, false}) {
    auto y = Both(rows * dim, [&](Backend& b, float* o) {
      b.RmsNorm(x.data(), weighted ? w.data() : nullptr, rows, dim, 1e-6f, o);
    });
    std::vector<double> ref(rows * dim);
    for (int r = 0; r < rows; ++r) {
      double ms = 0;
      for (int i = 0; i < dim; ++i) ms += double{x[r * dim + i]} * x[r * dim + i] / dim;
      for (int i = 0; i < dim; ++i) {
        ref[r * dim + i] = x[r * dim + i] / std::sqrt(ms + 1e-6) * (weighted ? w[i] : 1.0);
      }
    }
    ExpectClose(y, ref, 1e-6);
    if (!weighted) {
      EXPECT_NEAR(y[2 * dim], 1 / std::sqrt(2.0), 1e-6);
    }
  }
}

TEST_F(CpuBackendTest, RopeTrailingChannels) {
  const int rows = 2, heads = 3, hd = 10;
  const RopeTable t = MakePlainRope(4, 10000.0);
  const std::vector<float> x = Rand(rows * heads * hd, -1, 1, 7);
  const int64_t pos[rows] = {3, 1000};
  auto y = Both(x.size(), [&](Backend& b, float* o) {
    std::copy(x.begin(), x.end(), o);
    b.Rope(o, rows, heads, hd, t, pos, false);
  });
  for (int r = 0; r < rows; ++r) {
    for (int h = 0; h < heads; ++h) {
      const int base = (r * heads + h) * hd;
      for (int c = 0; c < 6; ++c) EXPECT_EQ(y[base + c], x[base + c]);  // nope part untouched
      for (int i = 0; i < 2; ++i) {
        const double a = static_cast<float>(pos[r]) * t.inv_freq[i];
        const double u = x[base + 6 + 2 * i], v = x[base + 7 + 2 * i];
        EXPECT_NEAR(y[base + 6 + 2 * i], u * std::cos(a) - v * std::sin(a), 1e-6);
        EXPECT_NEAR(y[base + 7 + 2 * i], v * std::cos(a) + u * std::sin(a), 1e-6);
      }
    }
  }
  b1_->Rope(y.data(), rows, heads, hd, t, pos, true);
  for (size_t k = 0; k < x.size(); ++k) EXPECT_NEAR(y[k], x[k], 1e-6);
}

// §2.2 mHC pre in double: post [n], comb [n*n] (row i = source), collapsed [dim].
void RefHyperPre(const HyperConnWeights& w, const float* X, int n, int dim, double hc_eps,
                 int iters, double* post, double* C, double* collapsed) {
  const int flat = n * dim;
  double ms = 0;
  for (int c = 0; c < flat; ++c) ms += double{X[c]} * X[c] / flat;
  const double inv = 1 / std::sqrt(ms + 1e-6);
  std::vector<double> m((2 + n) * n), pre(n);
  for (size_t k = 0; k < m.size(); ++k) {
    for (int c = 0; c < flat; ++c) m[k] += double{w.fn[k * flat + c]} * X[c] * inv;
  }
  for (int k = 0; k < n; ++k) {
    pre[k] = Sig(m[k] * w.scale[0] + w.base[k]) + hc_eps;
    post[k] = 2 * Sig(m[n + k] * w.scale[1] + w.base[n + k]);
  }
  for (int i = 0; i < n; ++i) {
    double s = 0;
    for (int j = 0; j < n; ++j) {
      const int k = 2 * n + i * n + j;
      s += C[i * n + j] = std::exp(m[k] * w.scale[2] + w.base[k]);
    }
    for (int j = 0; j < n; ++j) C[i * n + j] = C[i * n + j] / s + hc_eps;
  }
  // Divides each row (by_row) or each column of C by its sum + eps.
  auto normalise = [&](bool by_row) {
    for (int a = 0; a < n; ++a) {
      double s = 0;
      for (int b = 0; b < n; ++b) s += by_row ? C[a * n + b] : C[b * n + a];
      for (int b = 0; b < n; ++b) (by_row ? C[a * n + b] : C[b * n + a]) /= s + hc_eps;
    }
  };
  normalise(false);  // column first, after the row softmax
  for (int it = 1; it < iters; ++it) {
    normalise(true);
    normalise(false);
  }
  for (int c = 0; c < dim; ++c) {
    collapsed[c] = 0;
    for (int k = 0; k < n; ++k) collapsed[c] += pre[k] * X[k * dim + c];
  }
}

TEST_F(CpuBackendTest, HyperPre) {
  const int n = 4, dim = 8, rows = 2;
  HyperConnWeights w;
  w.fn = Rand((2 + n) * n * n * dim, -0.5f, 0.5f, 8);
  w.base = Rand((2 + n) * n, -1, 1, 9);
  w.scale = {0.7f, 1.3f, 1.0f};
  const std::vector<float> X = Rand(rows * n * dim, -2, 2, 10);
  for (int iters : {1, 3, 20}) {
    // One buffer per backend: collapsed [rows, dim], then post [rows, n], then comb.
    auto all = Both(rows * (dim + n + n * n), [&](Backend& b, float* o) {
      b.HyperPre(w, X.data(), rows, n, dim, 1e-6f, 1e-6f, iters, o + rows * dim,
                 o + rows * (dim + n), o);
    });
    const std::vector<float> col(all.begin(), all.begin() + rows * dim),
        post(all.begin() + rows * dim, all.begin() + rows * (dim + n)),
        comb(all.begin() + rows * (dim + n), all.end());
    std::vector<double> rp(rows * n), rc(rows * n * n), rx(rows * dim);
    for (int r = 0; r < rows; ++r) {
      RefHyperPre(w, X.data() + r * n * dim, n, dim, 1e-6, iters, &rp[r * n], &rc[r * n * n],
                  &rx[r * dim]);
    }
    ExpectClose(post, rp, 1e-5);
    ExpectClose(comb, rc, 1e-5);
    ExpectClose(col, rx, 1e-5);
    if (iters == 20) {  // Sinkhorn: nearly doubly stochastic
      for (int r = 0; r < rows; ++r) {
        for (int i = 0; i < n; ++i) {
          double row = 0, column = 0;
          for (int j = 0; j < n; ++j) {
            row += comb[r * n * n + i * n + j];
            column += comb[r * n * n + j * n + i];
          }
          EXPECT_NEAR(row, 1, 1e-3);
          EXPECT_NEAR(column, 1, 1e-4);
        }
      }
    }
  }
}

TEST_F(CpuBackendTest, HyperPostUsesCombTransposed) {
  // Streams X0 = [1, 2], X1 = [3, 4]; C = [[.1, .2], [.3, .4]] (row = source stream).
  const std::vector<float> X = {1, 2, 3, 4}, y = {10, 20}, post = {0.5f, 2},
                           C = {.1f, .2f, .3f, .4f};
  auto out = Both(4, [&](Backend& b, float* o) {
    b.HyperPost(X.data(), y.data(), post.data(), C.data(), 1, 2, 2, o);
  });
  // X'0 = .5 y + .1 X0 + .3 X1; X'1 = 2 y + .2 X0 + .4 X1.
  ExpectClose(out, {6.0, 11.4, 21.4, 42.0}, 1e-6);

  const int rows = 2, n = 4, dim = 5;
  const std::vector<float> Xs = Rand(rows * n * dim, -1, 1, 11), ys = Rand(rows * dim, -1, 1, 12),
                           ps = Rand(rows * n, 0, 2, 13), cs = Rand(rows * n * n, 0, 1, 14);
  auto got = Both(Xs.size(), [&](Backend& b, float* o) {
    b.HyperPost(Xs.data(), ys.data(), ps.data(), cs.data(), rows, n, dim, o);
  });
  std::vector<double> ref(Xs.size());
  for (int r = 0; r < rows; ++r) {
    for (int j = 0; j < n; ++j) {
      for (int c = 0; c < dim; ++c) {
        double s = double{ps[r * n + j]} * ys[r * dim + c];
        for (int i = 0; i < n; ++i) {
          s += double{cs[r * n * n + i * n + j]} * Xs[(r * n + i) * dim + c];
        }
        ref[(r * n + j) * dim + c] = s;
      }
    }
  }
  ExpectClose(got, ref, 1e-6);
}

TEST_F(CpuBackendTest, HyperHead) {
  const int n = 4, dim = 6, rows = 2;
  HyperHeadWeights w;
  w.fn = Rand(n * n * dim, -0.5f, 0.5f, 15);
  w.base = Rand(n, -1, 1, 16);
  w.scale = {0.8f};
  const std::vector<float> X = Rand(rows * n * dim, -2, 2, 17);
  auto y = Both(rows * dim, [&](Backend& b, float* o) {
    b.HyperHead(w, X.data(), rows, n, dim, 1e-6f, 1e-6f, o);
  });
  // The head's weights are mHC-pre's pre part: pad fn/base to the (2 + n) * n mixes.
  HyperConnWeights as_pre;
  as_pre.fn = w.fn;
  as_pre.fn.resize((2 + n) * n * n * dim, 0.0f);
  as_pre.base = w.base;
  as_pre.base.resize((2 + n) * n, 0.0f);
  as_pre.scale = {w.scale[0], 1, 1};
  std::vector<double> ref(rows * dim), post(n), comb(n * n);
  for (int r = 0; r < rows; ++r) {
    RefHyperPre(as_pre, X.data() + r * n * dim, n, dim, 1e-6, 1, post.data(), comb.data(),
                &ref[r * dim]);
  }
  ExpectClose(y, ref, 1e-5);
}

TEST_F(CpuBackendTest, SparseAttentionWithSink) {
  const int heads = 2, hd = 2;
  const float r0[2] = {1, 0}, r1[2] = {0, 1}, r2[2] = {1, 1}, big0[2] = {30, 0}, big1[2] = {0, 30};
  const float* rows_a[3] = {r0, r1, r2};
  const float* rows_c[2] = {big0, big1};
  const AttentionQuery queries[3] = {{rows_a, 3}, {nullptr, 0}, {rows_c, 2}};
  // Query t, head h at q[(t * heads + h) * hd]; scale 0.5 applies to every score.
  const std::vector<float> q = {2, 0, 0, 2, 5, 5, 5, 5, 200, 200, 200, 0};
  const float e = std::exp(1.0f), sinks[2] = {0.0f, std::log(2.0f)};
  auto o = Both(3 * heads * hd, [&](Backend& b, float* out) {
    b.SparseAttention(q.data(), queries, 3, heads, hd, sinks, 0.5f, out);
  });
  // Head 0 scores [1, 0, 1], sink e^0: (e r0 + r1 + e r2) / (1 + 1 + 2e).
  // Head 1 scores [0, 1, 1], sink e^ln2 = 2: (r0 + e r1 + e r2) / (2 + 1 + 2e).
  // Query 1 has only the sink: zero output. Query 2: scores of 3000 must not overflow.
  ExpectClose(
      o, {e / (1 + e), 0.5, (1 + e) / (3 + 2 * e), 2 * e / (3 + 2 * e), 0, 0, 0, 0, 15, 15, 30, 0},
      1e-6);
}

TEST_F(CpuBackendTest, IndexerScoresReluPerHead) {
  const float q[4] = {1, 2, -1, 1}, w[2] = {0.5f, 2};
  const float keys[8] = {1, 1, 1, -1, -1, 0, 2, -0.5f};
  auto s = Both(4, [&](Backend& b, float* o) { b.IndexerScores(q, w, 2, 2, keys, 4, o); });
  // Key 3: head 0 dot 1 (x0.5), head 1 dot -2.5 clipped to 0 (not -5).
  EXPECT_EQ(s, (std::vector<float>{1.5f, 0.0f, 2.0f, 0.5f}));
}

TEST_F(CpuBackendTest, SwiGluClamp) {
  const std::vector<float> g = {20, -20, 3, -3, 5, 0.5f}, u = {15, -15, 2, -12, 0.5f, 11};
  auto y = Both(6, [&](Backend& b, float* o) { b.SwiGlu(g.data(), u.data(), 6, 10.0f, o); });
  // Gate clamped only from above (-20 stays -20), up clamped to [-10, 10].
  ExpectClose(
      y,
      {Silu(10) * 10, Silu(-20) * -10, Silu(3) * 2, Silu(-3) * -10, Silu(5) * 0.5, Silu(0.5) * 10},
      1e-6);
  EXPECT_NEAR(y[1], Silu(-20) * -10, 1e-5 * std::fabs(Silu(-20) * 10));  // not silu(-10) * -10
  for (float limit : {0.0f, -1.0f}) {
    auto z = Both(6, [&](Backend& b, float* o) { b.SwiGlu(g.data(), u.data(), 6, limit, o); });
    std::vector<double> ref(6);
    for (int i = 0; i < 6; ++i) ref[i] = Silu(g[i]) * u[i];
    ExpectClose(z, ref, 1e-6);
  }
}

}  // namespace
}  // namespace deepinfer
