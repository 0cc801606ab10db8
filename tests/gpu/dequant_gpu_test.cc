// The CUDA dequantisers against the CPU backend's row dequantiser, on random data of shapes that
// are not multiples of the block sizes. Outputs are poisoned (NaN) before every launch.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "engine/model/weights.h"
#include "kernels/cuda_available.h"
#include "kernels/dequant.h"
#include "tests/unit/test_util.h"

namespace deepinfer {
namespace {

class DequantGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  }
  std::mt19937 rng_{std::random_device{}()};

  std::vector<uint8_t> RandomBytes(size_t n, uint8_t avoid_mask = 0) {
    std::vector<uint8_t> v(n);
    for (auto& b : v) {
      do b = static_cast<uint8_t>(rng_());
      while (avoid_mask && (b & 0x7f) == avoid_mask);
    }
    return v;
  }
  std::vector<uint8_t> RandomScales(size_t n) {
    std::vector<uint8_t> v(n);
    for (auto& b : v) b = static_cast<uint8_t>(110 + rng_() % 30);
    return v;
  }

  std::vector<float> RunGpu(const std::vector<uint8_t>& w, const std::vector<uint8_t>& s,
                            size_t n_out, bool fp4, int64_t out, int64_t in) {
    uint8_t *dw, *ds;
    float* dy;
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&dw), w.size()), cudaSuccess);
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&ds), s.size()), cudaSuccess);
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&dy), n_out * 4), cudaSuccess);
    cudaMemcpy(dw, w.data(), w.size(), cudaMemcpyHostToDevice);
    cudaMemcpy(ds, s.data(), s.size(), cudaMemcpyHostToDevice);
    cudaMemset(dy, 0xff, n_out * 4);  // NaN poison
    int err = fp4 ? kernels::DequantFp4Block32(dw, ds, out, in, dy, nullptr)
                  : kernels::DequantFp8Block(dw, ds, out, in, 128, 128, dy, nullptr);
    EXPECT_EQ(err, 0);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<float> y(n_out);
    cudaMemcpy(y.data(), dy, n_out * 4, cudaMemcpyDeviceToHost);
    cudaFree(dw);
    cudaFree(ds);
    cudaFree(dy);
    return y;
  }
};

TEST_F(DequantGpuTest, Fp8BlockMatchesCpu) {
  for (auto [out, in] :
       {std::pair<int64_t, int64_t>{300, 200}, {128, 128}, {1, 513}, {257, 4096}}) {
    auto w = RandomBytes(out * in, 0x7f);
    auto s = RandomScales(((out + 127) / 128) * ((in + 127) / 128));
    auto y = RunGpu(w, s, out * in, false, out, in);
    const LinearWeight lw = testing::Fp8BlockView(out, in, w.data(), s.data());
    std::vector<float> row(in);
    for (int64_t o = 0; o < out; ++o) {
      DequantizeRow(lw, o, row.data());
      ASSERT_EQ(0, std::memcmp(row.data(), &y[o * in], in * 4))
          << "row " << o << " of " << out << "x" << in;
    }
  }
}

TEST_F(DequantGpuTest, Fp4Block32MatchesCpu) {
  for (auto [out, in] : {std::pair<int64_t, int64_t>{77, 96}, {2048, 64}, {1, 32}}) {
    auto w = RandomBytes(out * in / 2);
    auto s = RandomScales(out * in / 32);
    auto y = RunGpu(w, s, out * in, true, out, in);
    const LinearWeight lw = testing::Fp4BlockView(out, in, w.data(), s.data());
    std::vector<float> row(in);
    for (int64_t o = 0; o < out; ++o) {
      DequantizeRow(lw, o, row.data());
      ASSERT_EQ(0, std::memcmp(row.data(), &y[o * in], in * 4)) << "row " << o;
    }
  }
}

TEST_F(DequantGpuTest, Fp4RejectsWidthNotDivisibleBy32) {
  EXPECT_NE(0, kernels::DequantFp4Block32(nullptr, nullptr, 4, 40, nullptr, nullptr));
}

}  // namespace
}  // namespace deepinfer
