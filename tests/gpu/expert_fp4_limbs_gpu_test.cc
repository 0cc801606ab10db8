// The exact one-row expert products (kernels/expert_fp4_limbs.h): the limbs hold the CPU's FP8
// round trip bit for bit; the products agree with a double-precision sum over the CPU's
// dequantised weights, exactly where fp32 can hold the result; the gate/up launch gives the
// separate products' SwiGLU bit for bit; groups past the live count write nothing. Fresh random
// data each run (the seed is reported on failure), outputs poisoned before each launch.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "engine/model/quant.h"
#include "engine/model/weights.h"
#include "kernels/cuda_available.h"
#include "kernels/expert_fp4_limbs.h"
#include "kernels/ops.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/unit/test_util.h"

namespace deepinfer {
namespace {

class ExpertFp4LimbsGpuTest : public testing::DeviceTest {
 protected:
  // Rows of normal values, each 128-wide block at its own magnitude (1e-6 .. 1e3), so the blocks'
  // exponents differ and some fall to the amax floor. few_bits: eighths in [-1, 1] instead, whose
  // products' sums fp32 holds exactly.
  std::vector<float> Activations(int64_t rows, int64_t in, bool few_bits = false) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(rows * in);
    if (few_bits) {
      for (float& v : x) v = static_cast<float>(static_cast<int>(rng_() % 17) - 8) / 8.0f;
      return x;
    }
    for (int64_t b = 0; b < rows * in / 128; ++b) {
      const float magnitude = std::pow(10.0f, static_cast<float>(rng_() % 10) - 6.0f);
      for (int64_t i = 0; i < 128; ++i) x[b * 128 + i] = normal(rng_) * magnitude;
    }
    return x;
  }
  // The limbs and scales of x from the device.
  void Limbs(const std::vector<float>& x, int64_t rows, int64_t in, std::vector<uint8_t>* limbs,
             std::vector<float>* scales) {
    uint8_t* d_limbs = ToDevice(std::vector<uint8_t>(rows * in * 3, 0xAB));
    float* d_scales = ToDevice(std::vector<float>(rows * in / 128, std::nanf("")));
    ASSERT_EQ(kernels::ActLimbsFp8(ToDevice(x), rows, in, d_limbs, d_scales, nullptr), 0);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    *limbs = ToHost(d_limbs, rows * in * 3);
    *scales = ToHost(d_scales, rows * in / 128);
  }

  const uint32_t seed_ = std::random_device{}();
  std::mt19937 rng_{seed_};
};

// The value limb i of a row encodes: q * 2^(e - 9), with scale = 2^(e - 10).
float LimbValue(const std::vector<uint8_t>& limbs, const std::vector<float>& scales, int64_t row,
                int64_t in, int64_t i) {
  const uint8_t* block = &limbs[(row * (in / 32) + i / 32) * kernels::kLimbBlockBytes];
  const int q =
      static_cast<int8_t>(block[64 + i % 32]) * 65536 + block[32 + i % 32] * 256 + block[i % 32];
  return static_cast<float>(q) * scales[row * (in / 128) + i / 128] * 2.0f;
}

TEST_F(ExpertFp4LimbsGpuTest, LimbsHoldTheCpuRoundTripAndRoundingTwiceChangesNothing) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  const int64_t rows = 3, in = 640;
  std::vector<float> x = Activations(rows, in);
  x[5] = 0.0f;
  x[200] = 1e30f;  // sets its block's exponent: the block's other values round to zero
  // A block whose amax rounds down to 224 * 2^e: rounded again, its exponent is e - 1 (every value
  // doubles its e4m3 value, which must stay exact).
  for (int64_t i = 256; i < 384; ++i) x[in + i] = 0.01f * static_cast<float>(i - 320);
  x[in + 300] = 225.0f * 0x1p-5f;
  std::vector<uint8_t> limbs, limbs_again;
  std::vector<float> scales, scales_again;
  Limbs(x, rows, in, &limbs, &scales);
  std::vector<float> want = x;
  for (int64_t r = 0; r < rows; ++r) QdqFp8Blocks(&want[r * in], static_cast<int>(in), 128, 1e-4f);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < in; ++i) {
      ASSERT_EQ(LimbValue(limbs, scales, r, in, i), want[r * in + i]) << "row " << r << " at " << i;
    }
  }
  // Activations the reference numerics already rounded (the one-row step's input) stay as they are.
  Limbs(want, rows, in, &limbs_again, &scales_again);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < in; ++i) {
      ASSERT_EQ(LimbValue(limbs_again, scales_again, r, in, i), want[r * in + i]) << "at " << i;
    }
  }
  EXPECT_NE(kernels::ActLimbsFp8(nullptr, 1, 96, nullptr, nullptr, nullptr), 0);  // in % 128
}

// Products of random experts over one-row groups (x rows and y rows permuted) against a double
// sum over the CPU's dequantised weights and the CPU's rounded activations.
TEST_F(ExpertFp4LimbsGpuTest, ProductsMatchTheCpu) {
  struct Case {
    int64_t out, in;
    int groups;
    int32_t live;  // -1: none
    bool exact;    // weight scales all 2^0, activations in eighths: fp32 holds every sum exactly
  };
  for (const Case& c : {Case{2048, 4096, 6, -1, false},  // V4-Flash gate/up at batch 1
                        Case{4096, 2048, 6, -1, false},  // the down projection
                        Case{300, 384, 5, 3, false},     // tails; groups past the live count
                        Case{37, 1152, 1, -1, false},    // few warps: two rows a warp
                        Case{4100, 256, 6, -1, false},   // four rows a warp, tail of out
                        Case{64, 256, 4, -1, true}}) {
    SCOPED_TRACE("seed " + std::to_string(seed_) + " shape " + std::to_string(c.out) + "x" +
                 std::to_string(c.in));
    const int experts = 3;
    std::vector<std::vector<uint8_t>> w(experts), s(experts);
    std::vector<const uint8_t*> dw(experts), ds(experts);
    for (int e = 0; e < experts; ++e) {
      w[e].resize(c.out * c.in / 2);
      s[e].resize(c.out * c.in / 32);
      for (auto& b : w[e]) b = static_cast<uint8_t>(rng_());
      for (auto& b : s[e]) b = static_cast<uint8_t>(c.exact ? 127 : 118 + rng_() % 14);
      dw[e] = ToDevice(w[e]);
      ds[e] = ToDevice(s[e]);
    }
    std::vector<int32_t> x_perm(c.groups), y_perm(c.groups);
    for (int i = 0; i < c.groups; ++i) x_perm[i] = y_perm[i] = i;
    std::shuffle(x_perm.begin(), x_perm.end(), rng_);
    std::shuffle(y_perm.begin(), y_perm.end(), rng_);
    std::vector<kernels::ExpertGroup> groups(c.groups);
    for (int i = 0; i < c.groups; ++i) {
      groups[i].expert = static_cast<int32_t>(rng_() % experts);
      groups[i].rows = 1;
      groups[i].x_row[0] = x_perm[i];
      groups[i].y_row[0] = y_perm[i];
    }
    std::vector<float> x = Activations(c.groups, c.in, c.exact);
    std::vector<uint8_t> limbs;
    std::vector<float> scales;
    Limbs(x, c.groups, c.in, &limbs, &scales);
    float* dy = ToDevice(std::vector<float>(c.groups * c.out, std::nanf("")));
    int32_t* d_live = c.live >= 0 ? ToDevice(std::vector<int32_t>{c.live}) : nullptr;
    ASSERT_EQ(kernels::Fp4ExpertGemvLimbs(ToDevice(dw), ToDevice(ds), c.out, c.in, ToDevice(groups),
                                          c.groups, ToDevice(limbs), ToDevice(scales), dy, nullptr,
                                          d_live),
              0);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> y = ToHost(dy, c.groups * c.out);
    for (int64_t r = 0; r < c.groups; ++r)
      QdqFp8Blocks(&x[r * c.in], static_cast<int>(c.in), 128, 1e-4f);
    std::vector<float> row(c.in);
    for (int gi = 0; gi < c.groups; ++gi) {
      const kernels::ExpertGroup& g = groups[gi];
      const float* xr = &x[g.x_row[0] * c.in];
      const float* yr = &y[g.y_row[0] * c.out];
      if (c.live >= 0 && gi >= c.live) {
        for (int64_t o = 0; o < c.out; ++o) ASSERT_TRUE(std::isnan(yr[o])) << "group " << gi;
        continue;
      }
      const LinearWeight lw =
          testing::Fp4BlockView(c.out, c.in, w[g.expert].data(), s[g.expert].data());
      for (int64_t o = 0; o < c.out; ++o) {
        DequantizeRow(lw, o, row.data());
        double want = 0, mag = 0;
        for (int64_t i = 0; i < c.in; ++i) {
          want += static_cast<double>(row[i]) * xr[i];
          mag += std::fabs(static_cast<double>(row[i]) * xr[i]);
        }
        if (c.exact) {
          ASSERT_EQ(yr[o], static_cast<float>(want)) << "out " << o << " group " << gi;
        } else {
          ASSERT_NEAR(yr[o], want, 1e-5 * mag + 1e-30) << "out " << o << " group " << gi;
        }
      }
    }
  }
  EXPECT_NE(kernels::Fp4ExpertGemvLimbs(nullptr, nullptr, 8, 96, nullptr, 1, nullptr, nullptr,
                                        nullptr, nullptr),
            0);  // in % 128
}

// The kernels serve one-row groups only (the device forward's one-row steps); a larger group is
// written nowhere rather than half-computed.
TEST_F(ExpertFp4LimbsGpuTest, GroupsOfMoreThanOneRowWriteNothing) {
  const int64_t out = 64, in = 128;
  const std::vector<uint8_t> weights(out * in / 2, 0x22), scales(out * in / 32, 127);
  const uint8_t* w = ToDevice(weights);
  const uint8_t* sc = ToDevice(scales);
  std::vector<kernels::ExpertGroup> groups(2);
  groups[0].rows = 2;  // rows 0 and 1
  groups[0].x_row[1] = groups[0].y_row[1] = 1;
  groups[1].rows = 1;
  groups[1].x_row[0] = groups[1].y_row[0] = 2;
  std::vector<uint8_t> limbs;
  std::vector<float> limb_scales;
  Limbs(Activations(3, in), 3, in, &limbs, &limb_scales);
  float* y = ToDevice(std::vector<float>(3 * out, std::nanf("")));
  ASSERT_EQ(kernels::Fp4ExpertGemvLimbs(
                ToDevice(std::vector<const uint8_t*>{w}), ToDevice(std::vector<const uint8_t*>{sc}),
                out, in, ToDevice(groups), 2, ToDevice(limbs), ToDevice(limb_scales), y, nullptr),
            0);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> got = ToHost(y, 3 * out);
  for (int64_t o = 0; o < 2 * out; ++o) ASSERT_TRUE(std::isnan(got[o])) << "at " << o;
  for (int64_t o = 2 * out; o < 3 * out; ++o) ASSERT_FALSE(std::isnan(got[o])) << "at " << o;
}

// The fused gate/up launch gives exactly the separate products followed by the SwiGLU kernel.
TEST_F(ExpertFp4LimbsGpuTest, GateUpMatchesSeparateProductsAndSwiGlu) {
  struct Case {
    int64_t out, in;
    int n;
    float limit;
  };
  for (const Case& c :
       {Case{2048, 4096, 6, 10.0f}, Case{300, 384, 4, 0.5f}, Case{37, 1152, 1, 0}}) {
    const int64_t out = c.out, in = c.in;
    const int n = c.n;
    const float limit = c.limit;
    SCOPED_TRACE("seed " + std::to_string(seed_));
    const int experts = 3;
    std::vector<const uint8_t*> w1(experts), s1(experts), w3(experts), s3(experts);
    auto matrix = [&](int64_t bytes, bool scale) {
      std::vector<uint8_t> v(bytes);
      for (auto& b : v) b = static_cast<uint8_t>(scale ? 120 + rng_() % 10 : rng_());
      return ToDevice(v);
    };
    for (int e = 0; e < experts; ++e) {
      w1[e] = matrix(out * in / 2, false);
      s1[e] = matrix(out * in / 32, true);
      w3[e] = matrix(out * in / 2, false);
      s3[e] = matrix(out * in / 32, true);
    }
    std::vector<kernels::ExpertGroup> groups(n);
    for (int i = 0; i < n; ++i) {
      groups[i].expert = static_cast<int32_t>(rng_() % experts);
      groups[i].rows = 1;
      groups[i].x_row[0] = groups[i].y_row[0] = i;
    }
    std::vector<uint8_t> limbs;
    std::vector<float> scales;
    Limbs(Activations(n, in), n, in, &limbs, &scales);
    const uint8_t* dl = ToDevice(limbs);
    const float* dsc = ToDevice(scales);
    auto* dg = ToDevice(groups);
    const std::vector<float> poison(n * out, std::nanf(""));
    float *g = ToDevice(poison), *u = ToDevice(poison), *want = ToDevice(poison),
          *got = ToDevice(poison);
    auto *dw1 = ToDevice(w1), *ds1 = ToDevice(s1), *dw3 = ToDevice(w3), *ds3 = ToDevice(s3);
    ASSERT_EQ(kernels::Fp4ExpertGemvLimbs(dw1, ds1, out, in, dg, n, dl, dsc, g, nullptr), 0);
    ASSERT_EQ(kernels::Fp4ExpertGemvLimbs(dw3, ds3, out, in, dg, n, dl, dsc, u, nullptr), 0);
    ASSERT_EQ(kernels::SwiGlu(g, u, n * out, limit, want, nullptr), 0);
    ASSERT_EQ(kernels::Fp4ExpertGateUpLimbs(dw1, ds1, dw3, ds3, out, in, dg, n, limit, dl, dsc, got,
                                            nullptr),
              0);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> a = ToHost(got, n * out), b = ToHost(want, n * out);
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_FALSE(std::isnan(a[i])) << "unwritten at " << i;
      ASSERT_EQ(a[i], b[i]) << "at " << i << ", shape " << out << "x" << in;
    }
  }
}

}  // namespace
}  // namespace deepinfer
