// The FP8 decode products on the tensor cores (kernels/linear_fp8_mma.h) against a double sum over
// the CPU's dequantised weights and the CPU's FP8 round trip of the activations: shapes whose rows
// are not multiples of 16, short wide weights (warps split the columns), 1 to 8 rows, fresh random
// data each run (the seed reported on failure), outputs poisoned. A row's sums must not depend on
// the other rows of the step.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/model/quant.h"
#include "engine/model/weights.h"
#include "kernels/cuda_available.h"
#include "kernels/gemm_fp8.h"
#include "kernels/linear_fp8_mma.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/unit/test_util.h"

namespace deepinfer {
namespace {

// Error bound relative to sum_i |x_i W_i| (as in gemm_fp8_gpu_test.cc): the e4m3 products are
// exact, but Hopper's FP8 tensor cores add an mma's 32 products with ~14 bits, truncating (the
// DeepSeek-V3 report); random e4m3 weights span ~17 binades, so small products lose bits. A
// simulation of that alignment gave up to ~1.2e-4 of the magnitude; 2^-10 leaves margin and still
// catches layout mistakes (a wrong scale or fragment moves a result by O(1) of its magnitude).
// The test prints the measured worst case so the bound can be tightened after a run.
constexpr double kTol = 1.0 / 1024;

class LinearFp8MmaGpuTest : public testing::DeviceTest {
 protected:
  const uint32_t seed_ = std::random_device{}();
  std::mt19937 rng_{seed_};
};

TEST_F(LinearFp8MmaGpuTest, MatchesTheCpuAndEveryRowIsIndependentOfTheOthers) {
  struct Case {
    int64_t out, in;
  };
  double worst = 0;  // |error| / sum |terms|, printed at the end
  for (const Case& c :
       {Case{300, 1024}, Case{37, 128}, Case{1024, 4096}, Case{4096, 8192}, Case{2050, 384}}) {
    std::vector<uint8_t> w(c.out * c.in), s(((c.out + 127) / 128) * (c.in / 128));
    for (auto& b : w) {
      do b = static_cast<uint8_t>(rng_());
      while ((b & 0x7f) == 0x7f);  // NaN
    }
    for (auto& b : s) b = static_cast<uint8_t>(118 + rng_() % 12);
    const uint8_t* dw = ToDevice(w);
    const uint8_t* ds = ToDevice(s);
    const LinearWeight lw = testing::Fp8BlockView(c.out, c.in, w.data(), s.data());
    std::vector<float> row(c.in);
    for (int rows : {1, 3, 8}) {
      SCOPED_TRACE("seed " + std::to_string(seed_) + " shape " + std::to_string(c.out) + "x" +
                   std::to_string(c.in) + " rows " + std::to_string(rows));
      // Each 128-value block at its own magnitude, so the activation scales differ.
      std::normal_distribution<float> normal(0.0f, 1.0f);
      std::vector<float> x(rows * c.in);
      for (int64_t b = 0; b < rows * c.in / 128; ++b) {
        const float magnitude = std::pow(10.0f, static_cast<float>(rng_() % 7) - 3.0f);
        for (int64_t i = 0; i < 128; ++i) x[b * 128 + i] = normal(rng_) * magnitude;
      }
      const int64_t padded = kernels::Fp8GemmPaddedRows(rows);
      uint8_t* xq = ToDevice(std::vector<uint8_t>(padded * c.in));
      float* xs = ToDevice(std::vector<float>(kernels::Fp8ActScaleCount(rows, c.in)));
      ASSERT_EQ(kernels::QuantizeActFp8(ToDevice(x), rows, c.in, xq, xs, nullptr), 0);
      float* dy = ToDevice(std::vector<float>(rows * c.out, std::nanf("")));
      ASSERT_EQ(kernels::Fp8MmaGemv(dw, ds, c.out, c.in, xq, xs, padded, rows, dy, nullptr), 0);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const std::vector<float> y = ToHost(dy, rows * c.out);
      for (int r = 0; r < rows; ++r) {
        QdqFp8Blocks(&x[r * c.in], static_cast<int>(c.in), 128, 1e-4f);
      }
      for (int64_t o = 0; o < c.out; ++o) {
        DequantizeRow(lw, o, row.data());
        for (int r = 0; r < rows; ++r) {
          double want = 0, mag = 0;
          for (int64_t i = 0; i < c.in; ++i) {
            want += static_cast<double>(row[i]) * x[r * c.in + i];
            mag += std::fabs(static_cast<double>(row[i]) * x[r * c.in + i]);
          }
          worst = std::max(worst, std::fabs(y[r * c.out + o] - want) / (mag + 1e-30));
          ASSERT_NEAR(y[r * c.out + o], want, kTol * mag + 1e-30) << "out " << o << " row " << r;
        }
      }
      // The last row alone (its bytes and scales at their place in the batch) gives the same bits.
      float* dy1 = ToDevice(std::vector<float>(c.out, std::nanf("")));
      const int last = rows - 1;
      ASSERT_EQ(kernels::Fp8MmaGemv(dw, ds, c.out, c.in, xq + last * c.in, xs + last, padded, 1,
                                    dy1, nullptr),
                0);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const std::vector<float> y1 = ToHost(dy1, c.out);
      ASSERT_EQ(std::memcmp(y1.data(), &y[last * c.out], c.out * sizeof(float)), 0)
          << "row " << last << " alone differs from itself among " << rows;
    }
  }
  std::printf("Fp8MmaGemv: worst |error| / sum |terms| = %.3g (bound %.3g)\n", worst, kTol);
}

TEST_F(LinearFp8MmaGpuTest, RejectsBadArguments) {
  const uint8_t* w = ToDevice(std::vector<uint8_t>(256 * 128));
  const uint8_t* xq = ToDevice(std::vector<uint8_t>(16 * 256));
  EXPECT_NE(kernels::Fp8MmaGemv(w, w, 16, 96, xq, nullptr, 16, 1, nullptr, nullptr), 0);   // in
  EXPECT_NE(kernels::Fp8MmaGemv(w, w, 16, 128, xq, nullptr, 16, 9, nullptr, nullptr), 0);  // rows
  EXPECT_NE(kernels::Fp8MmaGemv(w, w, 16, 128, xq, nullptr, 2, 3, nullptr, nullptr), 0);   // x_ld
  EXPECT_NE(kernels::Fp8MmaGemv(w + 1, w, 16, 128, xq, nullptr, 16, 1, nullptr, nullptr), 0);
}

}  // namespace
}  // namespace deepinfer
