// Which kernel the device step's dense FP8 product (engine/backend/cuda/device_dense.h) takes at
// one row: wide products (kOneRowMmaMinIn inputs or more) whose input has no FP8 round trip yet go
// to the tensor cores (QuantizeActFp8, then Fp8MmaGemv), the others stay on the GEMV with the
// input's round trip, and dense_mma off keeps every one-row product on the GEMV. Each is checked
// bit for bit against the kernels it should have launched, on fresh random data each run, and the
// two kernels' sums are checked to differ, so a wrong dispatch shows.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/backend/cuda/device_dense.h"
#include "kernels/forward_glue.h"
#include "kernels/gemm_fp8.h"
#include "kernels/linear_fp8.h"
#include "kernels/linear_fp8_mma.h"
#include "tests/gpu/gpu_test_util.h"

namespace deepinfer {
namespace {

class DeviceDenseGpuTest : public testing::DeviceTest {
 protected:
  struct Product {
    DeviceLinear w;
    const float* x = nullptr;  // one row of w.in values
  };

  // Random FP8 weights (no NaN bytes) with e8m0 block scales near 1, and one activation row
  // whose 128-value blocks have different magnitudes, so the activation scales differ.
  Product MakeProduct(int64_t out, int64_t in) {
    std::vector<uint8_t> w(out * in), s(((out + 127) / 128) * (in / 128));
    for (auto& b : w) {
      do b = static_cast<uint8_t>(rng_());
      while ((b & 0x7f) == 0x7f);
    }
    for (auto& b : s) b = static_cast<uint8_t>(118 + rng_() % 12);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(in);
    for (int64_t b = 0; b < in / 128; ++b) {
      const float magnitude = std::pow(10.0f, static_cast<float>(rng_() % 5) - 2.0f);
      for (int64_t i = 0; i < 128; ++i) x[b * 128 + i] = normal(rng_) * magnitude;
    }
    Product p;
    p.w.format = WeightFormat::kFp8Block;
    p.w.out = out;
    p.w.in = in;
    p.w.data = ToDevice(w);
    p.w.scale = ToDevice(s);
    p.x = ToDevice(x);
    return p;
  }

  // A plan with the scratch Dense uses at one row (poisoned, so a read of unwritten scratch shows).
  StepPlan PlanFor(int64_t in, bool dense_mma) {
    const int64_t padded = kernels::Fp8GemmPaddedRows(1);
    StepPlan plan;
    plan.dense_mma = dense_mma;
    plan.buf.act = ToDevice(std::vector<float>(padded * in, std::nanf("")));
    plan.buf.act8 = ToDevice(std::vector<uint8_t>(padded * in, 0xff));
    plan.buf.act8_scale =
        ToDevice(std::vector<float>(kernels::Fp8ActScaleCount(1, in), std::nanf("")));
    return plan;
  }

  std::vector<float> ViaDense(const StepPlan& plan, const Product& p, const float* x_fp8) {
    float* y = ToDevice(std::vector<float>(p.w.out, std::nanf("")));
    EXPECT_EQ(Dense(plan, p.w, p.x, 1, y, nullptr, x_fp8), 0);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    return ToHost(y, p.w.out);
  }

  std::vector<float> ViaTensorCores(const Product& p) {
    const int64_t padded = kernels::Fp8GemmPaddedRows(1);
    uint8_t* xq = ToDevice(std::vector<uint8_t>(padded * p.w.in));
    float* xs = ToDevice(std::vector<float>(kernels::Fp8ActScaleCount(1, p.w.in)));
    float* y = ToDevice(std::vector<float>(p.w.out, std::nanf("")));
    EXPECT_EQ(kernels::QuantizeActFp8(p.x, 1, p.w.in, xq, xs, nullptr), 0);
    EXPECT_EQ(
        kernels::Fp8MmaGemv(p.w.data, p.w.scale, p.w.out, p.w.in, xq, xs, padded, 1, y, nullptr),
        0);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    return ToHost(y, p.w.out);
  }

  std::vector<float> ViaGemv(const Product& p) {
    float* xr = ToDevice(std::vector<float>(p.w.in));
    float* y = ToDevice(std::vector<float>(p.w.out, std::nanf("")));
    EXPECT_EQ(kernels::QdqFp8Rows(p.x, 1, p.w.in, xr, nullptr), 0);
    EXPECT_EQ(kernels::Fp8BlockGemv(p.w.data, p.w.scale, p.w.out, p.w.in, xr, 1, y, nullptr), 0);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    return ToHost(y, p.w.out);
  }

  static bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  }

  const uint32_t seed_ = std::random_device{}();
  std::mt19937 rng_{seed_};
};

TEST_F(DeviceDenseGpuTest, OneRowOfAWideProductTakesTheTensorCores) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  const Product p = MakeProduct(/*out=*/300, /*in=*/8192);  // wo_b's width, out not a tile multiple
  const std::vector<float> mma = ViaTensorCores(p);
  const std::vector<float> gemv = ViaGemv(p);
  ASSERT_FALSE(SameBits(mma, gemv)) << "the two kernels' sums must differ for the test to decide";
  EXPECT_TRUE(SameBits(ViaDense(PlanFor(8192, /*dense_mma=*/true), p, nullptr), mma));
  EXPECT_TRUE(SameBits(ViaDense(PlanFor(8192, /*dense_mma=*/false), p, nullptr), gemv));
}

TEST_F(DeviceDenseGpuTest, NarrowProductsAndRoundedInputsStayOnTheGemv) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  const Product narrow = MakeProduct(/*out=*/260, /*in=*/4096);
  const std::vector<float> narrow_gemv = ViaGemv(narrow);
  ASSERT_FALSE(SameBits(ViaTensorCores(narrow), narrow_gemv));
  EXPECT_TRUE(SameBits(ViaDense(PlanFor(4096, /*dense_mma=*/true), narrow, nullptr), narrow_gemv));

  // A wide product whose input a previous kernel already rounded (x_fp8) reads that round trip.
  const Product wide = MakeProduct(/*out=*/128, /*in=*/8192);
  float* rounded = ToDevice(std::vector<float>(8192));
  ASSERT_EQ(kernels::QdqFp8Rows(wide.x, 1, 8192, rounded, nullptr), 0);
  const std::vector<float> wide_gemv = ViaGemv(wide);
  ASSERT_FALSE(SameBits(ViaTensorCores(wide), wide_gemv));
  EXPECT_TRUE(SameBits(ViaDense(PlanFor(8192, /*dense_mma=*/true), wide, rounded), wide_gemv));
}

}  // namespace
}  // namespace deepinfer
