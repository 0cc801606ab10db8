// The CPU-order products (kernels/dot_cpu_order.h) against the CPU's own: each weight row
// dequantised by DequantizeRow and summed by OrderedDot must give the same floats, bit for bit,
// for FP4 and FP8 weights (tails past the tiles included) and for the grouped expert products,
// also past one launch's 65,535 groups. Fresh random data each run, outputs poisoned first.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/model/weights.h"
#include "kernels/cuda_available.h"
#include "kernels/dot_cpu_order.h"
#include "kernels/exact_math.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/unit/test_util.h"

namespace deepinfer {
namespace {

using testing::DeviceVector;

class DotCpuOrderGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  }
  std::vector<uint8_t> Bytes(size_t n, int lo, int span) {
    std::vector<uint8_t> b(n);
    for (auto& x : b)
      x = static_cast<uint8_t>(span > 0 ? lo + static_cast<int>(rng_() % span) : rng_());
    return b;
  }
  std::vector<float> Normal(size_t n) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng_);
    return v;
  }
  // The CPU's product of weight row `o` and x: DequantizeRow, then OrderedDot.
  static float CpuDot(const LinearWeight& w, int64_t o, const float* x) {
    std::vector<float> row(w.in);
    DequantizeRow(w, o, row.data());
    return OrderedDot(row.data(), x, w.in);
  }
  const uint32_t seed_ = std::random_device{}();
  std::mt19937 rng_{seed_};
};

TEST_F(DotCpuOrderGpuTest, DenseProductsEqualTheCpusBitForBit) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  struct Case {
    kernels::StoredFormat format;
    int64_t out, in, rows;
  };
  for (const Case& c : {Case{kernels::StoredFormat::kFp4Block32, 37, 96, 3},
                        Case{kernels::StoredFormat::kFp8Block128, 200, 300, 2}}) {
    const bool fp4 = c.format == kernels::StoredFormat::kFp4Block32;
    std::vector<uint8_t> w = Bytes(fp4 ? c.out * c.in / 2 : c.out * c.in, 0, 0);
    if (!fp4) {
      for (auto& b : w) b = (b & 0x7f) == 0x7f ? b - 1 : b;  // e4m3 has NaN there, weights do not
    }
    const int64_t n_scales = fp4 ? c.out * c.in / 32 : ((c.out + 127) / 128) * ((c.in + 127) / 128);
    const std::vector<uint8_t> s = Bytes(n_scales, 118, 14);
    const std::vector<float> x = Normal(c.rows * c.in);
    const DeviceVector<uint8_t> dw(w), ds(s);
    const DeviceVector<float> dx(x);
    const auto dy = DeviceVector<float>::Poisoned(c.rows * c.out);
    ASSERT_EQ(kernels::QuantizedDotCpuOrder(c.format, dw.get(), ds.get(), 0, c.out, c.in, dx.get(),
                                            c.in, c.rows, dy.get(), c.out, nullptr),
              0);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> y = dy.ToHost();
    const LinearWeight lw = fp4 ? testing::Fp4BlockView(c.out, c.in, w.data(), s.data())
                                : testing::Fp8BlockView(c.out, c.in, w.data(), s.data());
    for (int64_t r = 0; r < c.rows; ++r) {
      for (int64_t o = 0; o < c.out; ++o) {
        const float want = CpuDot(lw, o, &x[r * c.in]);
        ASSERT_EQ(std::memcmp(&y[r * c.out + o], &want, sizeof(float)), 0)
            << "row " << r << " out " << o << ": " << y[r * c.out + o] << " vs " << want;
      }
    }
  }
}

// More groups than one launch's grid holds (65,535 along y): every group is computed, in the
// CPU's order, and groups past the live count write nothing.
TEST_F(DotCpuOrderGpuTest, GroupedExpertsPastOneLaunchEqualTheCpus) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  const int experts = 3, groups = 70'000, live = 69'990;
  const int64_t out = 4, in = 64;
  std::vector<std::vector<uint8_t>> w(experts), s(experts);
  std::vector<DeviceVector<uint8_t>> dw, ds;
  std::vector<const uint8_t*> w_ptrs, s_ptrs;
  for (int e = 0; e < experts; ++e) {
    w[e] = Bytes(out * in / 2, 0, 0);
    s[e] = Bytes(out * in / 32, 120, 10);
    w_ptrs.push_back(dw.emplace_back(w[e]).get());
    s_ptrs.push_back(ds.emplace_back(s[e]).get());
  }
  std::vector<kernels::ExpertGroup> g(groups);
  for (int i = 0; i < groups; ++i) {
    g[i] = kernels::ExpertGroup{};
    g[i].expert = static_cast<int32_t>(rng_() % experts);
    g[i].rows = 1;
    g[i].x_row[0] = i;
    g[i].y_row[0] = i;
  }
  const std::vector<float> x = Normal(static_cast<size_t>(groups) * in);
  const DeviceVector<const uint8_t*> d_w(w_ptrs), d_s(s_ptrs);
  const DeviceVector<kernels::ExpertGroup> d_g(g);
  const DeviceVector<float> dx(x);
  const auto dy = DeviceVector<float>::Poisoned(static_cast<size_t>(groups) * out);
  const DeviceVector<int32_t> d_live(std::vector<int32_t>{live});
  ASSERT_EQ(kernels::Fp4ExpertCpuOrder(d_w.get(), d_s.get(), out, in, d_g.get(), groups, dx.get(),
                                       dy.get(), d_live.get(), nullptr),
            0);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> y = dy.ToHost();
  for (int i = 0; i < groups; ++i) {
    const LinearWeight lw =
        testing::Fp4BlockView(out, in, w[g[i].expert].data(), s[g[i].expert].data());
    for (int64_t o = 0; o < out; ++o) {
      const float got = y[static_cast<size_t>(i) * out + o];
      if (i >= live) {
        ASSERT_TRUE(std::isnan(got)) << "group " << i << " past the live count";
        continue;
      }
      const float want = CpuDot(lw, o, &x[static_cast<size_t>(i) * in]);
      ASSERT_EQ(std::memcmp(&got, &want, sizeof(float)), 0) << "group " << i << " out " << o;
    }
  }
}

}  // namespace
}  // namespace deepinfer
