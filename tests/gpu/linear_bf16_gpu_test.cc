// The bf16 GEMV and GEMM against a double-precision sum of the same bf16 weights, on shapes that
// are not multiples of the warp tiles; outputs poisoned before each launch.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <tuple>
#include <vector>

#include "kernels/cuda_available.h"
#include "kernels/gemm_bf16.h"
#include "kernels/linear_bf16.h"
#include "tests/gpu/gpu_test_util.h"

namespace deepinfer {
namespace {

using testing::DeviceVector;

float Bf16ToF32(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Runs y = x W^T through `product` on random bf16 weights and normal activations and checks
// every output against the double sum: |y - sum| <= tol * sum of the products' magnitudes.
using Product = std::function<int(const uint16_t* w, int64_t out, int64_t in, const float* x,
                                  int rows, float* y)>;

class LinearBf16GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  }
  void Check(int64_t out, int64_t in, int rows, double tol, const Product& product) {
    std::vector<uint16_t> w(out * in);
    // Random finite bf16 values of moderate magnitude: sign, exponent 120..130, 7 mantissa bits.
    for (auto& b : w) {
      b = static_cast<uint16_t>(((rng_() & 1) << 15) | ((120 + rng_() % 11) << 7) |
                                (rng_() & 0x7f));
    }
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(rows * in);
    for (float& v : x) v = normal(rng_);
    DeviceVector<uint16_t> dw(w);
    DeviceVector<float> dx(x);
    auto dy = DeviceVector<float>::Poisoned(rows * out);
    ASSERT_EQ(product(dw.get(), out, in, dx.get(), rows, dy.get()), 0);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> y = dy.ToHost();
    for (int r = 0; r < rows; ++r) {
      for (int64_t o = 0; o < out; ++o) {
        double want = 0, mag = 0;
        for (int64_t i = 0; i < in; ++i) {
          const double p = static_cast<double>(Bf16ToF32(w[o * in + i])) * x[r * in + i];
          want += p;
          mag += std::fabs(p);
        }
        ASSERT_NEAR(y[r * out + o], want, tol * mag) << out << "x" << in << " row " << r;
      }
    }
  }
  std::mt19937 rng_{std::random_device{}()};
};

TEST_F(LinearBf16GpuTest, GemvMatchesDoubleSums) {
  const Product gemv = [](const uint16_t* w, int64_t out, int64_t in, const float* x, int rows,
                          float* y) { return kernels::Bf16Gemv(w, out, in, x, rows, y, nullptr); };
  // fp32 sums: the error is bounded by a small multiple of eps times the magnitudes.
  for (auto [out, in, rows] : {std::tuple<int64_t, int64_t, int>{256, 4096, 1},
                               {2048, 4096, 8},
                               {37, 72, 3},
                               {5000, 264, 5}}) {
    Check(out, in, rows, 1e-5, gemv);
  }
  EXPECT_NE(kernels::Bf16Gemv(nullptr, 8, 12, nullptr, 1, nullptr, nullptr), 0);  // in % 8
  EXPECT_NE(kernels::Bf16Gemv(nullptr, 8, 16, nullptr, 9, nullptr, nullptr), 0);  // rows > 8
}

// The tensor-core form for many rows: x split into two bf16 terms keeps ~16 mantissa bits, so the
// result is far closer to the fp32 sums than a plain bf16 product (2^-8 per activation) would be.
TEST_F(LinearBf16GpuTest, GemmOfSplitActivationsMatchesDoubleSums) {
  kernels::Bf16GemmContext ctx;
  ASSERT_EQ(ctx.Create(), 0);
  for (auto [out, in, rows] :
       {std::tuple<int64_t, int64_t, int>{256, 4096, 300}, {2048, 4096, 64}, {40, 72, 3}}) {
    auto split = DeviceVector<uint16_t>::Poisoned(2 * rows * in);
    const Product gemm = [&](const uint16_t* w, int64_t o, int64_t i, const float* x, int r,
                             float* y) {
      return kernels::Bf16Gemm(ctx, w, o, i, x, r, split.get(), y, nullptr);
    };
    // 2^-16 per product from the split and the fp32 accumulation: 2e-5 of the magnitudes.
    Check(out, in, rows, 2e-5, gemm);
  }
}

// Several weights of one width in one launch (the compressors' kv and gate products): each
// product's output is bit for bit its own Bf16Gemv launch's, outputs poisoned first.
TEST_F(LinearBf16GpuTest, MultiProductsMatchTheirOwnLaunches) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const auto& [in, outs] : {std::pair<int64_t, std::vector<int64_t>>{4096, {1024, 1024}},
                                 {4096, {512, 512, 256, 64}},
                                 {72, {37, 5000, 3}}}) {
    for (int rows : {1, 2, 8}) {
      std::vector<float> x(rows * in);
      for (float& v : x) v = normal(rng_);
      DeviceVector<float> dx(x);
      std::vector<DeviceVector<uint16_t>> weights;
      std::vector<DeviceVector<float>> ys, alone;
      std::vector<kernels::Bf16GemvProduct> products;
      for (int64_t out : outs) {
        std::vector<uint16_t> w(out * in);
        for (auto& b : w) {
          b = static_cast<uint16_t>(((rng_() & 1) << 15) | ((120 + rng_() % 11) << 7) |
                                    (rng_() & 0x7f));
        }
        weights.emplace_back(w);
        ys.push_back(DeviceVector<float>::Poisoned(rows * out));
        alone.push_back(DeviceVector<float>::Poisoned(rows * out));
        ASSERT_EQ(kernels::Bf16Gemv(weights.back().get(), out, in, dx.get(), rows,
                                    alone.back().get(), nullptr),
                  0);
        products.push_back({weights.back().get(), out, ys.back().get()});
      }
      ASSERT_EQ(kernels::Bf16GemvMulti(products.data(), static_cast<int>(products.size()), in,
                                       dx.get(), rows, nullptr),
                0);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      for (size_t p = 0; p < products.size(); ++p) {
        const std::vector<float> got = ys[p].ToHost(), want = alone[p].ToHost();
        for (float v : got) ASSERT_FALSE(std::isnan(v)) << "product " << p;
        ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0)
            << "in " << in << " rows " << rows << " product " << p;
      }
    }
  }
  EXPECT_NE(kernels::Bf16GemvMulti(nullptr, 0, 8, nullptr, 1, nullptr), 0);
}

}  // namespace
}  // namespace deepinfer
