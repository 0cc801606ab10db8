// The grouped MXFP4 expert GEMV against the CPU backend's dequantiser and a double-precision sum:
// several experts, groups of 1..8 rows (one expert in several groups, rows gathered and scattered
// out of order), shapes that are not multiples of the tiles, outputs poisoned before the launch.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/model/quant.h"
#include "engine/model/weights.h"
#include "kernels/cuda_available.h"
#include "kernels/expert_fp4.h"
#include "kernels/gemm_fp8.h"
#include "kernels/ops.h"
#include "tests/gpu/expert_groups.h"
#include "tests/unit/test_util.h"

namespace deepinfer {
namespace {

template <class T>
T* ToDevice(const std::vector<T>& v) {
  void* d = nullptr;
  EXPECT_EQ(cudaMalloc(&d, std::max<size_t>(v.size() * sizeof(T), 16)), cudaSuccess);
  cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice);
  return static_cast<T*>(d);
}

class ExpertFp4GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  }
  const uint32_t seed_ = std::random_device{}();  // fresh data each run, reported on failure
  std::mt19937 rng_{seed_};

  // tensor_cores: Fp4ExpertMma on FP8 activations (quantised on the GPU), checked against the
  // CPU's QDQ of the same activations; otherwise Fp4ExpertGemv on fp32 activations. live >= 0:
  // the kernels get a device live count, and the groups from `live` on must write nothing.
  // window > 1: the tensor-core kernel's window of groups, the groups sorted by expert (as
  // BuildExpertGroups writes them) so that runs of one expert share weight loads; the result must
  // also equal window 1's bit for bit.
  void Check(int64_t out, int64_t in, const std::vector<int>& group_rows, bool tensor_cores,
             int32_t live = -1, int window = 1, int experts = 5) {
    SCOPED_TRACE("seed " + std::to_string(seed_));
    std::vector<std::vector<uint8_t>> w(experts), s(experts);
    std::vector<const uint8_t*> dw(experts), ds(experts);
    for (int e = 0; e < experts; ++e) {
      w[e].resize(out * in / 2);
      s[e].resize(out * in / 32);
      for (auto& b : w[e]) b = static_cast<uint8_t>(rng_());
      for (auto& b : s[e]) b = static_cast<uint8_t>(118 + rng_() % 14);
      dw[e] = ToDevice(w[e]);
      ds[e] = ToDevice(s[e]);
    }
    // Groups: experts chosen at random (repeats allowed), x rows and y rows permuted.
    int total = 0;
    for (int r : group_rows) total += r;
    const std::vector<kernels::ExpertGroup> groups =
        testing::RandomExpertGroups(group_rows, experts, window > 1, rng_);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(total * in);
    for (float& v : x) v = normal(rng_);
    auto* d_weights = ToDevice(dw);
    auto* d_scales = ToDevice(ds);
    auto* d_groups = ToDevice(groups);
    float* dx = ToDevice(x);
    float* dy = ToDevice(std::vector<float>(total * out, std::nanf("")));
    const int max_rows = *std::max_element(group_rows.begin(), group_rows.end());
    int32_t* d_live = live >= 0 ? ToDevice(std::vector<int32_t>{live}) : nullptr;
    if (tensor_cores) {
      const int64_t padded = kernels::Fp8GemmPaddedRows(total);
      auto* dxq = ToDevice(std::vector<uint8_t>(padded * in));
      auto* dxs = ToDevice(std::vector<float>(kernels::Fp8ActScaleCount(total, in)));
      ASSERT_EQ(kernels::QuantizeActFp8(dx, total, in, dxq, dxs, nullptr), 0);
      ASSERT_EQ(kernels::Fp4ExpertMma(d_weights, d_scales, out, in, d_groups,
                                      static_cast<int>(groups.size()), dxq, dxs, padded, dy,
                                      nullptr, d_live, window),
                0);
      if (window > 1) {
        float* dy1 = ToDevice(std::vector<float>(total * out, std::nanf("")));
        ASSERT_EQ(kernels::Fp4ExpertMma(d_weights, d_scales, out, in, d_groups,
                                        static_cast<int>(groups.size()), dxq, dxs, padded, dy1,
                                        nullptr, d_live, 1),
                  0);
        std::vector<float> y8(total * out), y1(total * out);
        cudaMemcpy(y8.data(), dy, y8.size() * sizeof(float), cudaMemcpyDeviceToHost);
        cudaMemcpy(y1.data(), dy1, y1.size() * sizeof(float), cudaMemcpyDeviceToHost);
        cudaFree(dy1);
        ASSERT_EQ(std::memcmp(y8.data(), y1.data(), y8.size() * sizeof(float)), 0)
            << "window " << window << " differs from window 1";
      }
      for (int r = 0; r < total; ++r) QdqFp8Blocks(&x[r * in], in, 128, 1e-4f);  // the reference
      cudaDeviceSynchronize();
      cudaFree(dxq);
      cudaFree(dxs);
    } else {
      ASSERT_EQ(kernels::Fp4ExpertGemv(d_weights, d_scales, out, in, d_groups,
                                       static_cast<int>(groups.size()), max_rows, dx, dy, nullptr,
                                       d_live),
                0);
    }
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<float> y(total * out);
    cudaMemcpy(y.data(), dy, y.size() * sizeof(float), cudaMemcpyDeviceToHost);

    std::vector<float> row(in);
    for (size_t gi = 0; gi < groups.size(); ++gi) {
      const kernels::ExpertGroup& g = groups[gi];
      if (live >= 0 && static_cast<int32_t>(gi) >= live) {
        for (int r = 0; r < g.rows; ++r) {
          for (int64_t o = 0; o < out; ++o)
            ASSERT_TRUE(std::isnan(y[g.y_row[r] * out + o])) << "group " << gi << " past live";
        }
        continue;
      }
      const LinearWeight lw =
          testing::Fp4BlockView(out, in, w[g.expert].data(), s[g.expert].data());
      for (int64_t o = 0; o < out; ++o) {
        DequantizeRow(lw, o, row.data());
        for (int r = 0; r < g.rows; ++r) {
          double want = 0, mag = 0;
          for (int64_t i = 0; i < in; ++i) {
            want += static_cast<double>(row[i]) * x[g.x_row[r] * in + i];
            mag += std::fabs(static_cast<double>(row[i]) * x[g.x_row[r] * in + i]);
          }
          // fp32 sums of `in` products: the error bound scales with the sum of magnitudes.
          const float got = y[g.y_row[r] * out + o];
          ASSERT_NEAR(got, want, 1e-5 * mag + 1e-30) << "out " << o << " row " << r << " expert "
                                                     << g.expert << " shape " << out << "x" << in;
        }
      }
    }
    for (int e = 0; e < experts; ++e) {
      cudaFree(const_cast<uint8_t*>(dw[e]));
      cudaFree(const_cast<uint8_t*>(ds[e]));
    }
    cudaFree(d_weights);
    cudaFree(d_scales);
    cudaFree(d_groups);
    cudaFree(dx);
    cudaFree(dy);
    if (d_live) cudaFree(d_live);
  }
};

TEST_F(ExpertFp4GpuTest, MatchesCpuDequantisedProducts) {
  Check(2048, 4096, {1, 1, 1, 1, 1, 1}, false);        // decode at batch 1: six experts, one row
  Check(300, 96, {8, 3, 5, 1}, false);                 // tails: out not a multiple of the tile
  Check(4096, 2048, {8, 8, 7, 2, 6, 1, 4, 8}, false);  // the down projection, fuller groups
  Check(37, 1056, {2}, false);                         // few warps: one row per warp
}

TEST_F(ExpertFp4GpuTest, TensorCoresMatchCpuOnQuantisedActivations) {
  Check(2048, 4096, {1, 1, 1, 1, 1, 1}, true);
  Check(300, 256, {8, 3, 5, 1}, true);  // out not a multiple of 16
  Check(4096, 2048, {8, 8, 7, 2, 6, 1, 4, 8}, true);
  Check(37, 1152, {2}, true);
  EXPECT_NE(kernels::Fp4ExpertMma(nullptr, nullptr, 16, 96, nullptr, 1, nullptr, nullptr, 16,
                                  nullptr, nullptr),
            0);  // in % 128
  EXPECT_NE(kernels::Fp4ExpertMma(nullptr, nullptr, 16, 128, nullptr, 1, nullptr, nullptr, 16,
                                  nullptr, nullptr, nullptr, 3),
            0);  // a window other than 1, 2, 4 or 8
}

// Windows of 2, 4 and 8 groups (prefill: runs of one expert share each weight load) give every
// group the sums window 1 gives, bit for bit, across expert changes inside a window, a last
// partial window and a live count inside a window.
TEST_F(ExpertFp4GpuTest, WindowsOfGroupsGiveTheOneGroupSums) {
  const std::vector<int> rows = {8, 8, 8, 3, 8, 8, 1, 8, 8, 8, 5, 8, 8};
  Check(300, 256, rows, true, -1, 8);
  Check(2048, 4096, rows, true, -1, 4);
  Check(4096, 2048, rows, true, 11, 8);  // live count inside the second window
  Check(96, 384, {8, 8, 8, 8, 2}, true, -1, 2);
  // Full windows of one expert (prefill's case): 20 groups of 8 tokens over 2 experts.
  Check(2048, 4096, std::vector<int>(20, 8), true, -1, 8, 2);
  Check(64, 128, {8, 8, 8, 5}, true, -1, 2, 1);  // one 128-column slice: no prefetch
  Check(300, 256, {8, 8, 8}, true, 0, 8, 1);     // nothing live
}

// A captured launch covers the capacity; the routed count on the device decides what runs.
TEST_F(ExpertFp4GpuTest, GroupsPastTheLiveCountWriteNothing) {
  Check(300, 256, {8, 3, 5, 1, 2}, false, 3);
  Check(300, 256, {8, 3, 5, 1, 2}, true, 2);
  Check(64, 128, {1, 1}, false, 0);
}

// The fused gate/up launch gives exactly the separate products followed by the SwiGLU kernel.
TEST_F(ExpertFp4GpuTest, GateUpMatchesSeparateProductsAndSwiGlu) {
  struct Case {
    int64_t out, in;
    std::vector<int> rows;
    float limit;
  };
  for (const Case& c : {Case{2048, 4096, {1, 1, 1, 1, 1, 1}, 10.0f},  // decode at batch 1
                        Case{300, 96, {8, 3, 5, 1}, 0.5f},            // tails, clamping bites
                        Case{37, 1056, {2}, 0.0f}}) {                 // no clamp
    const int experts = 3;
    std::vector<std::vector<uint8_t>> bytes;
    auto matrix = [&](int64_t n, bool scale) {
      bytes.emplace_back(n);
      for (auto& b : bytes.back()) b = static_cast<uint8_t>(scale ? 120 + rng_() % 10 : rng_());
      return ToDevice(bytes.back());
    };
    std::vector<const uint8_t*> w1(experts), s1(experts), w3(experts), s3(experts);
    for (int e = 0; e < experts; ++e) {
      w1[e] = matrix(c.out * c.in / 2, false);
      s1[e] = matrix(c.out * c.in / 32, true);
      w3[e] = matrix(c.out * c.in / 2, false);
      s3[e] = matrix(c.out * c.in / 32, true);
    }
    int total = 0;
    std::vector<kernels::ExpertGroup> groups;
    for (int rows : c.rows) {
      kernels::ExpertGroup g{};
      g.expert = static_cast<int32_t>(rng_() % experts);
      g.rows = rows;
      for (int r = 0; r < rows; ++r, ++total) g.x_row[r] = g.y_row[r] = total;
      groups.push_back(g);
    }
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(total * c.in);
    for (float& v : x) v = normal(rng_);
    auto *dw1 = ToDevice(w1), *ds1 = ToDevice(s1), *dw3 = ToDevice(w3), *ds3 = ToDevice(s3);
    auto* dg = ToDevice(groups);
    float* dx = ToDevice(x);
    const std::vector<float> poison(total * c.out, std::nanf(""));
    float *g = ToDevice(poison), *u = ToDevice(poison), *want = ToDevice(poison),
          *got = ToDevice(poison);
    const int n = static_cast<int>(groups.size());
    const int max_rows = *std::max_element(c.rows.begin(), c.rows.end());
    ASSERT_EQ(kernels::Fp4ExpertGemv(dw1, ds1, c.out, c.in, dg, n, max_rows, dx, g, nullptr), 0);
    ASSERT_EQ(kernels::Fp4ExpertGemv(dw3, ds3, c.out, c.in, dg, n, max_rows, dx, u, nullptr), 0);
    ASSERT_EQ(kernels::SwiGlu(g, u, total * c.out, c.limit, want, nullptr), 0);
    ASSERT_EQ(kernels::Fp4ExpertGateUp(dw1, ds1, dw3, ds3, c.out, c.in, dg, n, max_rows, c.limit,
                                       dx, got, nullptr),
              0);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<float> a(total * c.out), b(total * c.out);
    cudaMemcpy(a.data(), got, a.size() * sizeof(float), cudaMemcpyDeviceToHost);
    cudaMemcpy(b.data(), want, b.size() * sizeof(float), cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_FALSE(std::isnan(a[i])) << "unwritten at " << i;
      ASSERT_EQ(a[i], b[i]) << "at " << i << ", shape " << c.out << "x" << c.in;
    }
    for (const auto* list : {&w1, &s1, &w3, &s3}) {
      for (const uint8_t* d : *list) cudaFree(const_cast<uint8_t*>(d));
    }
    for (void* p : std::initializer_list<void*>{dw1, ds1, dw3, ds3, dg, dx, g, u, want, got})
      cudaFree(p);
  }
}

// Tensor-core products of `groups` over one expert's random matrices (two with `pair`: the pair
// launch) on FP8 activations of `tokens` random rows; y [tokens, out] per matrix, host side.
std::vector<std::vector<float>> MmaProducts(std::mt19937& rng, int64_t out, int64_t in, int tokens,
                                            const std::vector<kernels::ExpertGroup>& groups,
                                            bool pair, int window) {
  std::vector<uint8_t> bytes[4] = {
      std::vector<uint8_t>(out * in / 2), std::vector<uint8_t>(out * in / 32),
      std::vector<uint8_t>(out * in / 2), std::vector<uint8_t>(out * in / 32)};
  std::mt19937 fixed(rng());  // the same matrices and activations for every caller's seed draw
  for (int m = 0; m < 4; ++m) {
    for (auto& b : bytes[m]) b = static_cast<uint8_t>(m % 2 ? 120 + fixed() % 10 : fixed());
  }
  std::vector<const uint8_t*> ptr[4];
  for (int m = 0; m < 4; ++m) ptr[m] = {ToDevice(bytes[m])};
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(tokens * in);
  for (float& v : x) v = normal(fixed);
  const int64_t padded = kernels::Fp8GemmPaddedRows(tokens);
  float* dx = ToDevice(x);
  auto* dxq = ToDevice(std::vector<uint8_t>(padded * in));
  auto* dxs = ToDevice(std::vector<float>(kernels::Fp8ActScaleCount(tokens, in)));
  EXPECT_EQ(kernels::QuantizeActFp8(dx, tokens, in, dxq, dxs, nullptr), 0);
  const std::vector<float> poison(tokens * out, std::nanf(""));
  float *y1 = ToDevice(poison), *y3 = ToDevice(poison);
  auto *w1 = ToDevice(ptr[0]), *s1 = ToDevice(ptr[1]), *w3 = ToDevice(ptr[2]),
       *s3 = ToDevice(ptr[3]);
  auto* dg = ToDevice(groups);
  const int n = static_cast<int>(groups.size());
  if (pair) {
    EXPECT_EQ(kernels::Fp4ExpertMmaPair(w1, s1, y1, w3, s3, y3, out, in, dg, n, dxq, dxs, padded,
                                        nullptr, nullptr, window),
              0);
  } else {
    EXPECT_EQ(kernels::Fp4ExpertMma(w1, s1, out, in, dg, n, dxq, dxs, padded, y1, nullptr, nullptr,
                                    window),
              0);
    EXPECT_EQ(kernels::Fp4ExpertMma(w3, s3, out, in, dg, n, dxq, dxs, padded, y3, nullptr, nullptr,
                                    window),
              0);
  }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<std::vector<float>> y(2, std::vector<float>(tokens * out));
  cudaMemcpy(y[0].data(), y1, y[0].size() * sizeof(float), cudaMemcpyDeviceToHost);
  cudaMemcpy(y[1].data(), y3, y[1].size() * sizeof(float), cudaMemcpyDeviceToHost);
  for (int m = 0; m < 4; ++m) cudaFree(const_cast<uint8_t*>(ptr[m][0]));
  for (void* p : std::initializer_list<void*>{dx, dxq, dxs, y1, y3, w1, s1, w3, s3, dg}) {
    cudaFree(p);
  }
  return y;
}

kernels::ExpertGroup Group(int first, int rows) {
  kernels::ExpertGroup g{};
  g.rows = rows;
  for (int r = 0; r < rows; ++r) g.x_row[r] = g.y_row[r] = first + r;
  return g;
}

// The gate and up products from one launch are each matrix's own launch, bit for bit; and a
// token's sums do not depend on the group it shares: eight tokens alone or in one group of eight
// give the same bits (what makes the tensor-core experts batch-invariant).
TEST_F(ExpertFp4GpuTest, PairLaunchAndGroupingLeaveEveryTokensSums) {
  for (int64_t out : {2048, 300}) {
    SCOPED_TRACE("seed " + std::to_string(seed_) + ", out " + std::to_string(out));
    std::vector<kernels::ExpertGroup> singles, one_group = {Group(0, 8)};
    for (int r = 0; r < 8; ++r) singles.push_back(Group(r, 1));
    const uint32_t draw = rng_();
    std::mt19937 a(draw), b(draw), c(draw), d(draw);
    const auto separate = MmaProducts(a, out, 4096, 8, singles, false, 1);
    const auto paired = MmaProducts(b, out, 4096, 8, singles, true, 1);
    const auto grouped = MmaProducts(c, out, 4096, 8, one_group, true, 1);
    const auto windowed = MmaProducts(d, out, 4096, 8, singles, true, 8);
    for (int m = 0; m < 2; ++m) {
      for (size_t i = 0; i < separate[m].size(); ++i) {
        ASSERT_FALSE(std::isnan(separate[m][i])) << "unwritten, matrix " << m << " at " << i;
        ASSERT_EQ(paired[m][i], separate[m][i]) << "pair launch, matrix " << m << " at " << i;
        ASSERT_EQ(grouped[m][i], separate[m][i]) << "one group of 8, matrix " << m << " at " << i;
        ASSERT_EQ(windowed[m][i], separate[m][i]) << "window 8, matrix " << m << " at " << i;
      }
    }
  }
}

TEST_F(ExpertFp4GpuTest, RejectsBadArguments) {
  EXPECT_NE(
      kernels::Fp4ExpertGemv(nullptr, nullptr, 8, 48, nullptr, 1, 1, nullptr, nullptr, nullptr), 0);
  EXPECT_NE(
      kernels::Fp4ExpertGemv(nullptr, nullptr, 8, 64, nullptr, 1, 9, nullptr, nullptr, nullptr), 0);
}

// The window choice is host logic: it runs without a GPU too.
TEST(ExpertMmaWindowTest, GrowsWithTheGroupsAnExpertAverages) {
  EXPECT_EQ(kernels::ExpertMmaWindow(6, 256), 1);  // decode at batch 1
  EXPECT_EQ(kernels::ExpertMmaWindow(64 * 6, 32), 1);
  EXPECT_EQ(kernels::ExpertMmaWindow(128 * 6, 32), 2);
  EXPECT_EQ(kernels::ExpertMmaWindow(256 * 6, 32), 4);
  EXPECT_EQ(kernels::ExpertMmaWindow(8192 * 6, 256), 8);
  EXPECT_EQ(kernels::ExpertMmaWindow(0, 256), 1);
  EXPECT_EQ(kernels::ExpertMmaWindow(100, 0), 1);
}

}  // namespace
}  // namespace deepinfer
