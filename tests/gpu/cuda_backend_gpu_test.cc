// The CUDA backend against the CPU backend: every op on fresh random inputs of several shapes
// (outputs poisoned first), then whole tiny models (FP8/FP4 and F32 checkpoints), prefill and
// decode, compared position by position.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "engine/backend/cuda/cuda_backend.h"
#include "engine/model/model.h"
#include "engine/model/tiny_checkpoint.h"
#include "kernels/cuda_available.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/unit/test_util.h"

namespace deepinfer {
namespace {

using testing::ExpectClose;

class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
    auto be = MakeCudaBackend(0);
    ASSERT_TRUE(be.ok()) << be.status().ToString();
    gpu_ = std::move(*be);
  }
  std::vector<float> Random(size_t n, float scale = 1.0f) {
    std::uniform_real_distribution<float> u(-scale, scale);
    std::vector<float> v(n);
    for (float& x : v) x = u(rng_);
    return v;
  }
  static std::vector<float> Poisoned(size_t n) { return std::vector<float>(n, std::nanf("")); }
  std::mt19937 rng_{std::random_device{}()};
  std::unique_ptr<Backend> cpu_ = MakeCpuBackend(2);
  std::unique_ptr<Backend> gpu_;
};

TEST_F(CudaBackendTest, ElementwiseNormAndRopeOps) {
  for (auto [rows, dim] : {std::pair<int64_t, int64_t>{3, 100}, {5, 7168}, {1, 1}}) {
    const auto x = Random(rows * dim, 3.0f), w = Random(dim);
    for (const float* weight : {w.data(), static_cast<const float*>(nullptr)}) {
      auto want = Poisoned(rows * dim), got = Poisoned(rows * dim);
      cpu_->RmsNorm(x.data(), weight, rows, dim, 1e-6f, want.data());
      gpu_->RmsNorm(x.data(), weight, rows, dim, 1e-6f, got.data());
      ExpectClose(got, want, 0.0f, "RmsNorm");  // summed in the CPU's order: bit-identical
    }
    const auto gate = Random(rows * dim, 12.0f), up = Random(rows * dim, 12.0f);
    for (float limit : {7.0f, 0.0f}) {
      auto want = Poisoned(rows * dim), got = Poisoned(rows * dim);
      cpu_->SwiGlu(gate.data(), up.data(), rows * dim, limit, want.data());
      gpu_->SwiGlu(gate.data(), up.data(), rows * dim, limit, got.data());
      ExpectClose(got, want, 0.0f, "SwiGlu");  // exp in double on both sides
    }
  }
  const RopeTable rope = MakePlainRope(16, 10000.0);
  const int heads = 3, head_dim = 40;
  const std::vector<int64_t> pos = {0, 7, 4095, 123456};
  for (bool inverse : {false, true}) {
    auto want = Random(pos.size() * heads * head_dim), got = want;
    cpu_->Rope(want.data(), static_cast<int64_t>(pos.size()), heads, head_dim, rope, pos.data(),
               inverse);
    gpu_->Rope(got.data(), static_cast<int64_t>(pos.size()), heads, head_dim, rope, pos.data(),
               inverse);
    ExpectClose(got, want, 0.0f, "Rope");
  }
  EXPECT_TRUE(gpu_->TakeError().ok());
}

TEST_F(CudaBackendTest, HyperConnectionOps) {
  const int n = 4;
  // Weights live as long as the backend (it keeps them by host address, like a model's).
  std::vector<std::unique_ptr<HyperConnWeights>> pre_weights;
  std::vector<std::unique_ptr<HyperHeadWeights>> head_weights;
  for (int64_t dim : {64, 300}) {
    const int64_t rows = 3, flat = n * dim, mix = (2 + n) * n;
    pre_weights.push_back(std::make_unique<HyperConnWeights>(
        HyperConnWeights{Random(mix * flat, 0.1f), Random(mix), Random(3)}));
    const HyperConnWeights& w = *pre_weights.back();
    const auto streams = Random(rows * flat);
    std::vector<float> post_c(rows * n), comb_c(rows * n * n), col_c(rows * dim);
    auto post_g = Poisoned(rows * n), comb_g = Poisoned(rows * n * n), col_g = Poisoned(rows * dim);
    cpu_->HyperPre(w, streams.data(), rows, n, dim, 1e-6f, 1e-6f, 20, post_c.data(), comb_c.data(),
                   col_c.data());
    gpu_->HyperPre(w, streams.data(), rows, n, dim, 1e-6f, 1e-6f, 20, post_g.data(), comb_g.data(),
                   col_g.data());
    // Every sum in the CPU's order (kernels/exact_math.h): bit-identical.
    ExpectClose(post_g, post_c, 0.0f, "HyperPre post");
    ExpectClose(comb_g, comb_c, 0.0f, "HyperPre comb");
    ExpectClose(col_g, col_c, 0.0f, "HyperPre collapsed");
    const auto y = Random(rows * dim);
    auto want = Poisoned(rows * flat), got = Poisoned(rows * flat);
    cpu_->HyperPost(streams.data(), y.data(), post_c.data(), comb_c.data(), rows, n, dim,
                    want.data());
    gpu_->HyperPost(streams.data(), y.data(), post_c.data(), comb_c.data(), rows, n, dim,
                    got.data());
    ExpectClose(got, want, 0.0f, "HyperPost");
    head_weights.push_back(std::make_unique<HyperHeadWeights>(
        HyperHeadWeights{Random(n * flat, 0.1f), Random(n), Random(1)}));
    const HyperHeadWeights& h = *head_weights.back();
    auto head_c = Poisoned(rows * dim), head_g = Poisoned(rows * dim);
    cpu_->HyperHead(h, streams.data(), rows, n, dim, 1e-6f, 1e-6f, head_c.data());
    gpu_->HyperHead(h, streams.data(), rows, n, dim, 1e-6f, 1e-6f, head_g.data());
    ExpectClose(head_g, head_c, 0.0f, "HyperHead");
  }
  EXPECT_TRUE(gpu_->TakeError().ok());
}

TEST_F(CudaBackendTest, AttentionAndIndexerOps) {
  const int heads = 3, head_dim = 64;
  const auto pool = Random(700 * head_dim);
  std::vector<std::vector<const float*>> rows(4);
  for (size_t t = 0; t < rows.size(); ++t) {
    const int count = t == 0 ? 0 : t == 1 ? 1 : t == 2 ? 129 : 650;
    for (int e = 0; e < count; ++e) rows[t].push_back(&pool[(rng_() % 700) * head_dim]);
  }
  std::vector<AttentionQuery> queries;
  for (auto& r : rows) queries.push_back({r.data(), static_cast<int>(r.size())});
  const auto q = Random(rows.size() * heads * head_dim), sinks = Random(heads);
  auto want = Poisoned(q.size()), got = Poisoned(q.size());
  cpu_->SparseAttention(q.data(), queries.data(), 4, heads, head_dim, sinks.data(), 0.125f,
                        want.data());
  gpu_->SparseAttention(q.data(), queries.data(), 4, heads, head_dim, sinks.data(), 0.125f,
                        got.data());
  ExpectClose(got, want, 0.0f, "SparseAttention");
  const auto iq = Random(heads * head_dim), iw = Random(heads);
  auto iwant = Poisoned(700), igot = Poisoned(700);
  cpu_->IndexerScores(iq.data(), iw.data(), heads, head_dim, pool.data(), 700, iwant.data());
  gpu_->IndexerScores(iq.data(), iw.data(), heads, head_dim, pool.data(), 700, igot.data());
  ExpectClose(igot, iwant, 0.0f, "IndexerScores");
  EXPECT_TRUE(gpu_->TakeError().ok());
}

TEST_F(CudaBackendTest, LinearAndEmbedInEveryPath) {
  const int64_t out = 300, in = 512;
  std::vector<uint8_t> w8(out * in), s8(((out + 127) / 128) * ((in + 127) / 128));
  for (auto& b : w8) {
    do b = static_cast<uint8_t>(rng_());
    while ((b & 0x7f) == 0x7f);
  }
  for (auto& b : s8) b = static_cast<uint8_t>(118 + rng_() % 12);
  LinearWeight fp8 = testing::Fp8BlockView(out, in, w8.data(), s8.data());
  const auto wf = Random(out * in);
  LinearWeight f32;
  f32.out = out;
  f32.in = in;
  f32.data = reinterpret_cast<const uint8_t*>(wf.data());
  // 1 and 3 rows at a 128-aligned offset take the FP8 GEMV; 20 rows, an unaligned offset and
  // fp32 weights take the CPU-order product. Reference numerics also quantise the activations.
  for (const LinearWeight* w : {&fp8, &f32}) {
    for (auto [rows, begin, n] : {std::tuple<int64_t, int64_t, int64_t>{1, 128, 172},
                                  {3, 0, 300},
                                  {20, 0, 300},
                                  {2, 37, 100}}) {
      for (bool quantize : {false, true}) {
        const auto x = Random(rows * in);
        auto want = Poisoned(rows * n), got = Poisoned(rows * n);
        cpu_->LinearRows(*w, begin, n, x.data(), rows, want.data(), quantize);
        gpu_->LinearRows(*w, begin, n, x.data(), rows, got.data(), quantize);
        // Sums of 512 products with cancellation: the bound grows like sqrt(in), as in
        // linear_fp8_gpu_test. Reference numerics (quantised activations) sum in the CPU's
        // order: bit-identical.
        ExpectClose(got, want, quantize ? 0.0f : 1e-4f * std::sqrt(static_cast<float>(in)),
                    w == &fp8 ? "Linear fp8" : "Linear f32");
      }
    }
  }
  const std::vector<int32_t> tokens = {0, 299, 17, 17};
  auto want = Poisoned(tokens.size() * in), got = Poisoned(tokens.size() * in);
  cpu_->Embed(fp8, tokens.data(), 4, want.data());
  gpu_->Embed(fp8, tokens.data(), 4, got.data());
  ExpectClose(got, want, 0.0f, "Embed");
  EXPECT_TRUE(gpu_->TakeError().ok());
}

// Whole tiny models: prefill of 200 tokens, then 6 decode steps, on both backends.
TEST_F(CudaBackendTest, WholeModelsAgreeWithTheCpu) {
  // The default tiny model, and a wider one whose reference numerics drifted furthest (0.57
  // relative error) while attention, mHC and exp still differed from the CPU in the last bit.
  for (auto [quantize, hidden, seed] : {std::tuple<const char*, int, uint64_t>{"fp8-fp4", 192, 11},
                                        {"fp8-fp4", 256, 12},
                                        {"none", 192, 1}}) {
    for (Numerics numerics : {Numerics::kExact, Numerics::kReference}) {
      testing::TempDir dir;
      TinySpec spec;
      spec.quantize = quantize;
      spec.hidden = hidden;
      spec.seed = seed;
      ASSERT_TRUE(MakeTinyCheckpoint(spec, dir.path()).ok());
      auto ck = LoadCheckpoint(dir.path());
      ASSERT_TRUE(ck.ok());
      // One CUDA backend per model: it keeps weights by their host address.
      auto gpu = MakeCudaBackend(0);
      ASSERT_TRUE(gpu.ok());
      Model on_cpu(**ck, *cpu_, numerics), on_gpu(**ck, **gpu, numerics);
      std::vector<int32_t> tokens;
      for (int i = 0; i < 206; ++i) tokens.push_back((i * 37 + 5) % 512);
      auto sc = on_cpu.NewSequence(), sg = on_gpu.NewSequence();
      std::vector<float> lc(200 * 512), lg(200 * 512, std::nanf(""));
      const std::span<const int32_t> prompt(tokens.data(), 200);
      ASSERT_TRUE(on_cpu.Forward(sc, prompt, lc.data(), nullptr).ok());
      ASSERT_TRUE(on_gpu.Forward(sg, prompt, lg.data(), nullptr).ok());
      for (int k = 0; k < 6; ++k) {
        std::vector<float> dc(512), dg(512, std::nanf(""));
        const std::span<const int32_t> one(&tokens[200 + k], 1);
        ASSERT_TRUE(on_cpu.Forward(sc, one, dc.data(), nullptr).ok());
        ASSERT_TRUE(on_gpu.Forward(sg, one, dg.data(), nullptr).ok());
        lc.insert(lc.end(), dc.begin(), dc.end());
        lg.insert(lg.end(), dg.begin(), dg.end());
      }
      int agree = 0;
      double worst = 0;
      for (size_t p = 0; p < lc.size() / 512; ++p) {
        const float* a = &lg[p * 512];
        const float* b = &lc[p * 512];
        double diff = 0, scale = 0;
        for (int v = 0; v < 512; ++v) {
          diff = std::max(diff, static_cast<double>(std::fabs(a[v] - b[v])));
          scale = std::max(scale, static_cast<double>(std::fabs(b[v])));
        }
        worst = std::max(worst, diff / scale);
        agree += std::max_element(a, a + 512) - a == std::max_element(b, b + 512) - b;
      }
      // The bound: per-position relative error below 1e-2, argmax agreement above 99 %.
      // Exact numerics differ only in the decode GEMV's summation order (~1e-6); the reference
      // numerics, where FP8 rounding would amplify any last-bit difference, sum everything in
      // the CPU's order and come out identical.
      const int positions = static_cast<int>(lc.size() / 512);
      const std::string what = std::string(quantize) + " hidden " + std::to_string(hidden) +
                               (numerics == Numerics::kExact ? " exact" : " reference");
      EXPECT_LT(worst, 1e-2) << what;
      EXPECT_GT(agree, positions * 99 / 100) << what;
      if (numerics == Numerics::kReference) {
        EXPECT_EQ(worst, 0.0) << what;
      }
      EXPECT_TRUE((*gpu)->TakeError().ok());
    }
  }
}

}  // namespace
}  // namespace deepinfer
