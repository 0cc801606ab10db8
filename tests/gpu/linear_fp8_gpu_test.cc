// The FP8 block-scaled GEMV against the CPU backend's Linear, on fresh random weights, scales and
// inputs of shapes that are not multiples of the tile sizes; the output is poisoned first.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <tuple>
#include <vector>

#include "engine/backend/backend.h"
#include "kernels/cuda_available.h"
#include "kernels/linear_fp8.h"
#include "tests/unit/test_util.h"

namespace deepinfer {
namespace {

template <typename T>
T* Upload(const std::vector<T>& v) {
  T* d = nullptr;
  EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), v.size() * sizeof(T)), cudaSuccess);
  cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice);
  return d;
}

TEST(LinearFp8GpuTest, MatchesCpuLinear) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto cpu = MakeCpuBackend(4);
  for (auto [out, in] : {std::pair<int64_t, int64_t>{300, 200},
                         {1, 129},
                         {4096, 7168},
                         {257, 1024},
                         {2, 512},
                         {16389, 1024},
                         {8195, 512},
                         {2050, 1024}}) {
    for (int rows : {1, 3, 8}) {
      std::vector<uint8_t> w(out * in), s(((out + 127) / 128) * ((in + 127) / 128));
      for (auto& b : w) {
        do b = static_cast<uint8_t>(rng());
        while ((b & 0x7f) == 0x7f);
      }
      for (auto& b : s) b = static_cast<uint8_t>(118 + rng() % 12);
      std::vector<float> x(rows * in), y_cpu(rows * out), y_gpu(rows * out);
      for (auto& v : x) v = u(rng);
      const LinearWeight lw = testing::Fp8BlockView(out, in, w.data(), s.data());
      cpu->Linear(lw, x.data(), rows, y_cpu.data(), false);
      uint8_t* dw = Upload(w);
      uint8_t* ds = Upload(s);
      float* dx = Upload(x);
      float* dy = Upload(std::vector<float>(rows * out, std::nanf("")));
      ASSERT_EQ(kernels::Fp8BlockGemv(dw, ds, out, in, dx, rows, dy, nullptr), 0);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      cudaMemcpy(y_gpu.data(), dy, y_gpu.size() * 4, cudaMemcpyDeviceToHost);
      for (int64_t i = 0; i < rows * out; ++i) {
        const float ref = y_cpu[i];
        ASSERT_NEAR(y_gpu[i], ref,
                    1e-4f * (1.0f + std::fabs(ref)) * std::sqrt(static_cast<float>(in)))
            << out << "x" << in << " rows " << rows << " at " << i;
      }
      // Batch invariance: the first row alone gives the same bits as inside the batch.
      float* dy1 = Upload(std::vector<float>(out, std::nanf("")));
      ASSERT_EQ(kernels::Fp8BlockGemv(dw, ds, out, in, dx, 1, dy1, nullptr), 0);
      std::vector<float> y1(out);
      ASSERT_EQ(cudaMemcpy(y1.data(), dy1, out * 4, cudaMemcpyDeviceToHost), cudaSuccess);
      ASSERT_EQ(std::memcmp(y1.data(), y_gpu.data(), out * 4), 0)
          << out << "x" << in << ": row 0 alone differs from row 0 of " << rows << " rows";
      cudaFree(dy1);
      cudaFree(dw);
      cudaFree(ds);
      cudaFree(dx);
      cudaFree(dy);
    }
  }
  EXPECT_NE(kernels::Fp8BlockGemv(nullptr, nullptr, 4, 4, nullptr, 9, nullptr, nullptr), 0);
}

// The grouped form (wo_a): each group's slice of every activation row against its own block of
// weight rows, in V4's layout (a token's groups side by side in one row), with padding after
// each row of x and y (poisoned, so a write outside a group's columns shows).
TEST(LinearFp8GpuTest, GroupedMatchesPerGroupLinear) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto cpu = MakeCpuBackend(4);
  for (auto [groups, out, in, rows] : {std::tuple<int, int64_t, int64_t, int>{8, 1024, 4096, 1},
                                       {3, 256, 1536, 5},
                                       {2, 128, 200, 8}}) {
    std::vector<uint8_t> w(groups * out * in), s(groups * (out / 128) * ((in + 127) / 128));
    for (auto& b : w) {
      do b = static_cast<uint8_t>(rng());
      while ((b & 0x7f) == 0x7f);
    }
    for (auto& b : s) b = static_cast<uint8_t>(118 + rng() % 12);
    const int64_t x_row = groups * in + 4, y_row = groups * out + 8;
    std::vector<float> x(rows * x_row);
    for (auto& v : x) v = u(rng);
    uint8_t* dw = Upload(w);
    uint8_t* ds = Upload(s);
    float* dx = Upload(x);
    float* dy = Upload(std::vector<float>(rows * y_row, std::nanf("")));
    ASSERT_EQ(kernels::Fp8BlockGemvGrouped(dw, ds, groups, out, in, dx, in, x_row, rows, dy, out,
                                           y_row, nullptr),
              0);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<float> y(rows * y_row);
    cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost);
    const LinearWeight lw = testing::Fp8BlockView(groups * out, in, w.data(), s.data());
    for (int r = 0; r < rows; ++r) {
      for (int g = 0; g < groups; ++g) {
        std::vector<float> want(out);
        cpu->LinearRows(lw, g * out, out, &x[r * x_row + g * in], 1, want.data(), false);
        for (int64_t o = 0; o < out; ++o) {
          ASSERT_NEAR(y[r * y_row + g * out + o], want[o],
                      1e-4f * (1.0f + std::fabs(want[o])) * std::sqrt(static_cast<float>(in)))
              << "row " << r << " group " << g << " out " << o;
        }
      }
      for (int64_t i = groups * out; i < y_row; ++i) ASSERT_TRUE(std::isnan(y[r * y_row + i]));
    }
    cudaFree(dw);
    cudaFree(ds);
    cudaFree(dx);
    cudaFree(dy);
  }
  // Groups must start on a scale block.
  EXPECT_NE(kernels::Fp8BlockGemvGrouped(nullptr, nullptr, 2, 100, 128, nullptr, 0, 128, 1, nullptr,
                                         0, 100, nullptr),
            0);
}

// Several weights of one width in one launch: each product's output is bit for bit its own
// launch's, with poisoned outputs (a row left unwritten or written twice by the wrong product
// shows). in % 512 != 0, or a weight off 16-byte alignment, makes each product take the launch it
// would have alone (the narrow kernel for that weight, the wide one for the others).
TEST(LinearFp8GpuTest, MultiProductsMatchTheirOwnLaunches) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  struct Case {
    int64_t in;
    std::vector<int64_t> outs;
    int unaligned = -1;  // this product's weight starts one byte past an aligned address
  };
  for (const Case& c :
       {Case{4096, {1024, 512, 2048, 300}}, Case{200, {130, 7}}, Case{1024, {16389, 2}},
        Case{4096, {2048, 2048}}, Case{1024, {640, 384}, 1}}) {
    for (int rows : {1, 3, 8}) {
      std::vector<kernels::Fp8GemvProduct> products;
      std::vector<float*> alone;
      std::vector<void*> owned;
      std::vector<float> x(rows * c.in);
      for (auto& v : x) v = u(rng);
      float* dx = Upload(x);
      for (int64_t out : c.outs) {
        const int shift = static_cast<int>(products.size()) == c.unaligned ? 1 : 0;
        std::vector<uint8_t> w(out * c.in + shift), s(((out + 127) / 128) * ((c.in + 127) / 128));
        for (auto& b : w) {
          do b = static_cast<uint8_t>(rng());
          while ((b & 0x7f) == 0x7f);
        }
        for (auto& b : s) b = static_cast<uint8_t>(118 + rng() % 12);
        uint8_t* dw = Upload(w);
        uint8_t* ds = Upload(s);
        float* dy = Upload(std::vector<float>(rows * out, std::nanf("")));
        float* dy1 = Upload(std::vector<float>(rows * out, std::nanf("")));
        ASSERT_EQ(kernels::Fp8BlockGemv(dw + shift, ds, out, c.in, dx, rows, dy1, nullptr), 0);
        products.push_back({dw + shift, ds, out, dy});
        alone.push_back(dy1);
        owned.insert(owned.end(), {dw, ds, dy, dy1});
      }
      ASSERT_EQ(kernels::Fp8BlockGemvMulti(products.data(), static_cast<int>(products.size()), c.in,
                                           dx, rows, nullptr),
                0);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      for (size_t p = 0; p < products.size(); ++p) {
        const size_t n = rows * products[p].out;
        std::vector<float> got(n), want(n);
        cudaMemcpy(got.data(), products[p].y, n * 4, cudaMemcpyDeviceToHost);
        cudaMemcpy(want.data(), alone[p], n * 4, cudaMemcpyDeviceToHost);
        for (size_t i = 0; i < n; ++i) ASSERT_FALSE(std::isnan(got[i])) << "product " << p;
        ASSERT_EQ(std::memcmp(got.data(), want.data(), n * 4), 0)
            << "in " << c.in << " rows " << rows << " product " << p;
      }
      for (void* d : owned) cudaFree(d);
      cudaFree(dx);
    }
  }
  EXPECT_NE(kernels::Fp8BlockGemvMulti(nullptr, 0, 512, nullptr, 1, nullptr), 0);
  EXPECT_NE(
      kernels::Fp8BlockGemvMulti(nullptr, kernels::kMaxGemvProducts + 1, 512, nullptr, 1, nullptr),
      0);
}

}  // namespace
}  // namespace deepinfer
