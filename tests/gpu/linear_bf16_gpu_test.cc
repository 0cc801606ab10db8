// The bf16 GEMV and GEMM against a double-precision sum of the same bf16 weights, on shapes that
// are not multiples of the warp tiles; outputs poisoned before each launch.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <tuple>
#include <vector>

#include "kernels/cuda_available.h"
#include "kernels/gemm_bf16.h"
#include "kernels/linear_bf16.h"

namespace deepinfer {
namespace {

float Bf16ToF32(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

class LinearBf16GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  }
  std::mt19937 rng_{std::random_device{}()};
};

TEST_F(LinearBf16GpuTest, MatchesDoubleSums) {
  for (auto [out, in, rows] : {std::tuple<int64_t, int64_t, int>{256, 4096, 1},
                               {2048, 4096, 8},
                               {37, 72, 3},
                               {5000, 264, 5}}) {
    std::vector<uint16_t> w(out * in);
    // Random finite bf16 values of moderate magnitude: sign, exponent 120..130, 7 mantissa bits.
    for (auto& b : w) {
      b = static_cast<uint16_t>(((rng_() & 1) << 15) | ((120 + rng_() % 11) << 7) |
                                (rng_() & 0x7f));
    }
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(rows * in);
    for (float& v : x) v = normal(rng_);
    uint16_t* dw;
    float *dx, *dy;
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dw), w.size() * 2), cudaSuccess);
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dx), x.size() * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dy), rows * out * 4), cudaSuccess);
    cudaMemcpy(dw, w.data(), w.size() * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice);
    cudaMemset(dy, 0xff, rows * out * 4);  // NaN poison
    ASSERT_EQ(kernels::Bf16Gemv(dw, out, in, dx, rows, dy, nullptr), 0);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<float> y(rows * out);
    cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost);
    for (int r = 0; r < rows; ++r) {
      for (int64_t o = 0; o < out; ++o) {
        double want = 0, mag = 0;
        for (int64_t i = 0; i < in; ++i) {
          const double p = static_cast<double>(Bf16ToF32(w[o * in + i])) * x[r * in + i];
          want += p;
          mag += std::fabs(p);
        }
        // fp32 sums: the error is bounded by a small multiple of eps times the magnitudes.
        ASSERT_NEAR(y[r * out + o], want, 1e-5 * mag) << out << "x" << in << " row " << r;
      }
    }
    cudaFree(dw);
    cudaFree(dx);
    cudaFree(dy);
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
    std::vector<uint16_t> w(out * in);
    for (auto& b : w) {
      b = static_cast<uint16_t>(((rng_() & 1) << 15) | ((120 + rng_() % 11) << 7) |
                                (rng_() & 0x7f));
    }
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(rows * in);
    for (float& v : x) v = normal(rng_);
    uint16_t *dw, *split;
    float *dx, *dy;
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dw), w.size() * 2), cudaSuccess);
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&split), x.size() * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dx), x.size() * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dy), rows * out * 4), cudaSuccess);
    cudaMemcpy(dw, w.data(), w.size() * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice);
    cudaMemset(dy, 0xff, rows * out * 4);  // NaN poison
    ASSERT_EQ(kernels::Bf16Gemm(ctx, dw, out, in, dx, rows, split, dy, nullptr), 0);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<float> y(rows * out);
    cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost);
    for (int r = 0; r < rows; ++r) {
      for (int64_t o = 0; o < out; ++o) {
        double want = 0, mag = 0;
        for (int64_t i = 0; i < in; ++i) {
          const double p = static_cast<double>(Bf16ToF32(w[o * in + i])) * x[r * in + i];
          want += p;
          mag += std::fabs(p);
        }
        // 2^-16 per product from the split and the fp32 accumulation: 2e-5 of the magnitudes.
        ASSERT_NEAR(y[r * out + o], want, 2e-5 * mag) << out << "x" << in << " row " << r;
      }
    }
    cudaFree(dw);
    cudaFree(split);
    cudaFree(dx);
    cudaFree(dy);
  }
}

}  // namespace
}  // namespace deepinfer
