// Number formats and QDQ: checked against hand values and a brute-force double-precision model
// of each grid (nearest value, ties to the even code), independent of the engine's search.
#include "engine/model/quant.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "engine/model/weights.h"
#include "tests/unit/test_util.h"

namespace deepinfer {
namespace {

// e4m3fn decoded from its definition: bias 7, subnormals m/8 * 2^-6, 0x7F/0xFF NaN.
double RefE4M3(uint8_t b) {
  const int e = (b >> 3) & 15, m = b & 7;
  if (e == 15 && m == 7) return NAN;
  const double v = e == 0 ? m / 8.0 * std::ldexp(1.0, -6) : (1 + m / 8.0) * std::ldexp(1.0, e - 7);
  return (b & 0x80) ? -v : v;
}

const double kE2M1[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};

// Nearest value of a sorted positive grid (saturating), ties to the even index.
double RefRound(double v, const std::vector<double>& grid) {
  const double a = std::min(std::fabs(v), grid.back());
  size_t best = 0;
  for (size_t i = 1; i < grid.size(); ++i) {
    const double d = std::fabs(a - grid[i]), db = std::fabs(a - grid[best]);
    if (d < db || (d == db && i % 2 == 0)) best = i;
  }
  return std::signbit(v) ? -grid[best] : grid[best];
}

std::vector<double> E4M3Grid() {
  std::vector<double> g;
  for (int c = 0; c <= 0x7E; ++c) g.push_back(RefE4M3(static_cast<uint8_t>(c)));
  return g;
}

// Block QDQ: scale 2^ceil(log2(max(amax, floor) / fmt_max)), value = grid(x / s) * s.
std::vector<double> RefQdq(const std::vector<float>& x, int block, double fmt_max, double floor,
                           const std::vector<double>& grid) {
  std::vector<double> out(x.size());
  for (size_t b0 = 0; b0 < x.size(); b0 += block) {
    const size_t b1 = std::min(x.size(), b0 + block);
    double amax = 0;
    for (size_t i = b0; i < b1; ++i) amax = std::max(amax, std::fabs(double{x[i]}));
    const double s = std::exp2(std::ceil(std::log2(std::max(amax, floor) / fmt_max)));
    for (size_t i = b0; i < b1; ++i) out[i] = RefRound(x[i] / s, grid) * s;
  }
  return out;
}

std::vector<float> RandomVec(int n, float lo, float hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

TEST(QuantTest, E8M0) {
  EXPECT_EQ(E8M0ToF32(127), 1.0f);
  EXPECT_EQ(double{E8M0ToF32(0)}, std::ldexp(1.0, -127));  // subnormal, not flushed
  EXPECT_EQ(E8M0ToF32(130), 8.0f);
  EXPECT_EQ(E8M0ToF32(120), 1.0f / 128);
  EXPECT_TRUE(std::isnan(E8M0ToF32(255)));
}

TEST(QuantTest, E4M3HandValues) {
  EXPECT_EQ(E4M3ToF32(0x38), 1.0f);
  EXPECT_EQ(E4M3ToF32(0x7E), 448.0f);
  EXPECT_EQ(double{E4M3ToF32(0x01)}, std::ldexp(1.0, -9));
  EXPECT_EQ(double{E4M3ToF32(0x08)}, std::ldexp(1.0, -6));
  EXPECT_EQ(double{E4M3ToF32(0x07)}, 7 * std::ldexp(1.0, -9));  // largest subnormal
  EXPECT_EQ(E4M3ToF32(0xB8), -1.0f);
  EXPECT_TRUE(std::isnan(E4M3ToF32(0x7F)));
  EXPECT_TRUE(std::isnan(E4M3ToF32(0xFF)));
  EXPECT_EQ(E4M3ToF32(0x80), 0.0f);
  EXPECT_TRUE(std::signbit(E4M3ToF32(0x80)));
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) == 0x7F) continue;
    EXPECT_EQ(double{E4M3ToF32(static_cast<uint8_t>(c))}, RefE4M3(static_cast<uint8_t>(c))) << c;
  }
}

TEST(QuantTest, F32ToE4M3) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) == 0x7F) continue;
    EXPECT_EQ(F32ToE4M3(E4M3ToF32(static_cast<uint8_t>(c))), c) << "code " << c;
  }
  EXPECT_EQ(F32ToE4M3(449.0f), 0x7E);  // saturates, no infinity
  EXPECT_EQ(F32ToE4M3(1e9f), 0x7E);
  EXPECT_EQ(F32ToE4M3(INFINITY), 0x7E);
  EXPECT_EQ(F32ToE4M3(-1000.0f), 0xFE);
  EXPECT_EQ(F32ToE4M3(1.0625f), 0x38);  // midpoint 1.0 | 1.125 -> even mantissa 1.0
  EXPECT_EQ(F32ToE4M3(1.1875f), 0x3A);  // midpoint 1.125 | 1.25 -> even mantissa 1.25
  EXPECT_EQ(F32ToE4M3(-1.0625f), 0xB8);
  EXPECT_EQ(F32ToE4M3(1.07f), 0x39);                      // nearer 1.125
  EXPECT_EQ(F32ToE4M3(std::ldexp(1.0f, -10)), 0x00);      // midpoint 0 | 2^-9
  EXPECT_EQ(F32ToE4M3(3 * std::ldexp(1.0f, -10)), 0x02);  // midpoint 2^-9 | 2^-8
  const std::vector<double> grid = E4M3Grid();
  for (float v : RandomVec(2000, -500.0f, 500.0f, 1)) {
    EXPECT_EQ(double{E4M3ToF32(F32ToE4M3(v))}, RefRound(v, grid)) << v;
  }
}

TEST(QuantTest, E2M1) {
  for (int n = 0; n < 8; ++n) {
    EXPECT_EQ(double{E2M1ToF32(static_cast<uint8_t>(n))}, kE2M1[n]);
    EXPECT_EQ(double{E2M1ToF32(static_cast<uint8_t>(n | 8))}, -kE2M1[n]);
  }
  EXPECT_EQ(F32ToE2M1(0.25f), 0);  // 0 | 0.5 -> 0
  EXPECT_EQ(F32ToE2M1(0.75f), 2);  // 0.5 | 1 -> 1.0
  EXPECT_EQ(F32ToE2M1(1.25f), 2);  // 1 | 1.5 -> 1.0
  EXPECT_EQ(F32ToE2M1(1.75f), 4);  // 1.5 | 2 -> 2.0
  EXPECT_EQ(F32ToE2M1(2.5f), 4);   // 2 | 3 -> 2.0
  EXPECT_EQ(F32ToE2M1(3.5f), 6);   // 3 | 4 -> 4.0
  EXPECT_EQ(F32ToE2M1(5.0f), 6);   // 4 | 6 -> 4.0
  EXPECT_EQ(F32ToE2M1(5.1f), 7);
  EXPECT_EQ(F32ToE2M1(100.0f), 7);  // saturates at 6
  EXPECT_EQ(F32ToE2M1(-0.75f), 0xA);
  EXPECT_EQ(F32ToE2M1(-7.0f), 0xF);
}

TEST(QuantTest, Bf16AndF16) {
  EXPECT_EQ(F32ToBf16(1.0f), 0x3F80);
  EXPECT_EQ(F32ToBf16(-2.0f), 0xC000);
  auto from_bits = [](uint32_t b) {
    float f;
    std::memcpy(&f, &b, 4);
    return f;
  };
  EXPECT_EQ(F32ToBf16(from_bits(0x3F808000)), 0x3F80);  // tie -> even
  EXPECT_EQ(F32ToBf16(from_bits(0x3F818000)), 0x3F82);  // tie -> even (up)
  EXPECT_EQ(F32ToBf16(from_bits(0x3F808001)), 0x3F81);  // just above the tie
  EXPECT_EQ(F32ToBf16(from_bits(0x3F807FFF)), 0x3F80);
  EXPECT_EQ(F32ToBf16(from_bits(0x7F7FFFFF)), 0x7F80);  // FLT_MAX rounds to inf
  const uint16_t nan = F32ToBf16(NAN);
  EXPECT_EQ(nan & 0x7F80, 0x7F80);
  EXPECT_NE(nan & 0x7F, 0);
  EXPECT_EQ(Bf16ToF32(0xC040), -3.0f);

  EXPECT_EQ(F16ToF32(0x3C00), 1.0f);
  EXPECT_EQ(F16ToF32(0xC000), -2.0f);
  EXPECT_EQ(F16ToF32(0x7BFF), 65504.0f);
  EXPECT_EQ(double{F16ToF32(0x0001)}, std::ldexp(1.0, -24));
  EXPECT_EQ(double{F16ToF32(0x03FF)}, 1023 * std::ldexp(1.0, -24));
  EXPECT_EQ(double{F16ToF32(0x0400)}, std::ldexp(1.0, -14));
  EXPECT_EQ(double{F16ToF32(0x3555)}, 1.0 / 4 * (1 + 0x155 / 1024.0));
  EXPECT_EQ(F16ToF32(0x7C00), INFINITY);
  EXPECT_EQ(F16ToF32(0xFC00), -INFINITY);
  EXPECT_TRUE(std::isnan(F16ToF32(0x7E00)));
}

TEST(QuantTest, Pow2ScaleExponent) {
  EXPECT_EQ(Pow2ScaleExponent(448.0f, 448.0f, 1e-4f), 0);
  EXPECT_EQ(Pow2ScaleExponent(449.0f, 448.0f, 1e-4f), 1);
  EXPECT_EQ(Pow2ScaleExponent(56.0f, 448.0f, 1e-4f), -3);
  EXPECT_EQ(Pow2ScaleExponent(1.0f, 448.0f, 1e-4f), -8);   // log2(1/448) = -8.81
  EXPECT_EQ(Pow2ScaleExponent(0.0f, 448.0f, 1e-4f), -22);  // floor: log2(1e-4/448) = -22.1
  EXPECT_EQ(Pow2ScaleExponent(6.0f, 6.0f, 1e-30f), 0);
  EXPECT_EQ(Pow2ScaleExponent(6.5f, 6.0f, 1e-30f), 1);
  EXPECT_EQ(Pow2ScaleExponent(0.0f, 6.0f, 6 * std::ldexp(1.0f, -126)), -126);
}

TEST(QuantTest, QdqFp8Blocks) {
  // On-grid values (amax exactly 448 * 2^k) are unchanged.
  std::vector<float> g = {448, 1, -0.5f, 0.001953125f, -240, 0, 13, 0.375f};
  for (float v : {28.0f, 1.0f / 16, -0.5f / 16, 0.125f}) g.push_back(v);  // block 2: scale 2^-4
  std::vector<float> q = g;
  QdqFp8Blocks(q.data(), static_cast<int>(q.size()), 8, 1e-4f);
  EXPECT_EQ(q, g);

  // Random blocks of very different magnitude and a partial last block (200 = 128 + 72).
  std::vector<float> x = RandomVec(200, -1.0f, 1.0f, 2);
  for (int i = 128; i < 200; ++i) x[i] *= 1000.0f;
  x[5] = 1e-3f;    // survives next to amax ~1 (scale 2^-8) ...
  x[133] = 1e-3f;  // ... but not next to amax ~1000 (scale 4): 2.5e-4 < 2^-10
  std::vector<float> y = x;
  QdqFp8Blocks(y.data(), 200, 128, 1e-4f);
  const std::vector<double> ref = RefQdq(x, 128, 448, 1e-4, E4M3Grid());
  for (int i = 0; i < 200; ++i) EXPECT_EQ(double{y[i]}, ref[i]) << i;
  EXPECT_NEAR(y[5], 1e-3, 1e-3 / 16);
  EXPECT_EQ(y[133], 0.0f);
  for (int b = 0; b < 2; ++b) {
    float amax = 0, qmax = 0;
    for (int i = 128 * b; i < std::min(200, 128 * (b + 1)); ++i) {
      amax = std::max(amax, std::fabs(x[i]));
      qmax = std::max(qmax, std::fabs(y[i]));
    }
    const double s = std::exp2(std::ceil(std::log2(double{amax} / 448)));
    EXPECT_LE(qmax, 448 * s);
    EXPECT_NEAR(qmax, amax, amax / 16);
  }
  // Block 0 alone gives the same result: blocks do not see each other.
  std::vector<float> alone(x.begin(), x.begin() + 128);
  QdqFp8Blocks(alone.data(), 128, 128, 1e-4f);
  EXPECT_EQ(alone, std::vector<float>(y.begin(), y.begin() + 128));

  std::vector<float> zeros(64, 0.0f);
  QdqFp8Blocks(zeros.data(), 64, 64, 1e-4f);  // amax floor: no 0/0
  EXPECT_EQ(zeros, std::vector<float>(64, 0.0f));
}

TEST(QuantTest, QdqFp4Blocks) {
  std::vector<double> grid(kE2M1, kE2M1 + 8);
  std::vector<float> g = {6, -3, 0.5f, 1.5f, 0, -4, 2, 1};
  for (float v : {0.75f, -0.1875f, 0.0625f, 0.5f}) g.push_back(v);  // amax 0.75: scale 2^-3
  std::vector<float> q = g;
  QdqFp4Blocks(q.data(), static_cast<int>(q.size()), 8);
  EXPECT_EQ(q, g);

  std::vector<float> x = RandomVec(96, -1.0f, 1.0f, 3);
  for (int i = 32; i < 64; ++i) x[i] *= 100.0f;
  std::vector<float> y = x;
  QdqFp4Blocks(y.data(), 96, 32);
  const std::vector<double> ref = RefQdq(x, 32, 6, 6 * std::ldexp(1.0, -126), grid);
  for (int i = 0; i < 96; ++i) EXPECT_EQ(double{y[i]}, ref[i]) << i;
  std::vector<float> alone(x.begin() + 64, x.end());
  QdqFp4Blocks(alone.data(), 32, 32);
  EXPECT_EQ(alone, std::vector<float>(y.begin() + 64, y.end()));
}

TEST(QuantTest, Hadamard) {
  float a[2] = {3, 1};
  HadamardTransform(a, 2);
  EXPECT_NEAR(a[0], 4 / std::sqrt(2.0), 1e-6);
  EXPECT_NEAR(a[1], 2 / std::sqrt(2.0), 1e-6);
  float b[4] = {1, 2, 3, 4};  // Sylvester rows ++++, +-+-, ++--, +--+, scaled by 1/2
  HadamardTransform(b, 4);
  EXPECT_FLOAT_EQ(b[0], 5);
  EXPECT_FLOAT_EQ(b[1], -1);
  EXPECT_FLOAT_EQ(b[2], -2);
  EXPECT_NEAR(b[3], 0, 1e-6);

  const int n = 128;
  std::vector<float> x = RandomVec(n, -2.0f, 2.0f, 4), y = x;
  HadamardTransform(y.data(), n);
  double nx = 0, ny = 0;
  for (int i = 0; i < n; ++i) {
    double h = 0;  // H[i][j] = (-1)^popcount(i & j) / sqrt(n)
    for (int j = 0; j < n; ++j) h += (__builtin_popcount(i & j) % 2 ? -x[j] : x[j]);
    EXPECT_NEAR(y[i], h / std::sqrt(n), 1e-5) << i;
    nx += double{x[i]} * x[i];
    ny += double{y[i]} * y[i];
  }
  EXPECT_NEAR(ny, nx, 1e-5 * nx);
  HadamardTransform(y.data(), n);  // H is symmetric and orthogonal: an involution
  for (int i = 0; i < n; ++i) EXPECT_NEAR(y[i], x[i], 1e-5);
}

TEST(QuantTest, DequantizeFp8Blocks) {
  const int out = 130, in = 200;  // partial blocks in both directions
  std::vector<uint8_t> data(out * in);
  for (int o = 0; o < out; ++o) {
    for (int i = 0; i < in; ++i) {
      uint8_t c = static_cast<uint8_t>((o * 7 + i * 13) % 256);
      data[o * in + i] = (c & 0x7F) == 0x7F ? c - 1 : c;  // no NaN codes
    }
  }
  const std::vector<uint8_t> scale = {120, 127, 131, 125};  // [2, 2] ue8m0
  LinearWeight w = testing::Fp8BlockView(out, in, data.data(), scale.data());
  std::vector<float> row(in);
  for (int o : {0, 1, 127, 128, 129}) {
    DequantizeRow(w, o, row.data());
    for (int i = 0; i < in; ++i) {
      const double s = std::ldexp(1.0, scale[(o / 128) * 2 + i / 128] - 127);
      ASSERT_EQ(double{row[i]}, RefE4M3(data[o * in + i]) * s) << o << "," << i;
    }
  }
  // Flash-Base experts: fp32 block scales.
  const std::vector<float> fscale = {0.375f, 2.5f, -1.0f, 0.125f};
  w.scale = reinterpret_cast<const uint8_t*>(fscale.data());
  w.scale_dtype = DType::kF32;
  DequantizeRow(w, 129, row.data());
  for (int i = 0; i < in; ++i) {
    EXPECT_EQ(double{row[i]}, RefE4M3(data[129 * in + i]) * fscale[2 + i / 128]) << i;
  }
}

TEST(QuantTest, DequantizeFp4AndFloat) {
  const int out = 3, in = 64;
  std::vector<uint8_t> data(out * in / 2);
  for (size_t k = 0; k < data.size(); ++k) data[k] = static_cast<uint8_t>(k * 37 + 11);
  const std::vector<uint8_t> scale = {127, 126, 129, 120, 130, 127};  // [3, 2]
  const LinearWeight w = testing::Fp4BlockView(out, in, data.data(), scale.data());
  std::vector<float> row(in);
  for (int o = 0; o < out; ++o) {
    DequantizeRow(w, o, row.data());
    for (int c = 0; c < in / 2; ++c) {
      const uint8_t byte = data[o * in / 2 + c];
      const double s = std::ldexp(1.0, scale[o * 2 + (2 * c) / 32] - 127);
      auto val = [](int nib) { return (nib & 8 ? -1 : 1) * kE2M1[nib & 7]; };
      EXPECT_EQ(double{row[2 * c]}, val(byte & 15) * s);  // low nibble = even column
      EXPECT_EQ(double{row[2 * c + 1]}, val(byte >> 4) * s);
    }
  }

  const std::vector<float> f = {1, -2, 3.5f, 4, 5, 6};
  LinearWeight wf;
  wf.out = 2;
  wf.in = 3;
  wf.data = reinterpret_cast<const uint8_t*>(f.data());
  std::vector<float> r(3);
  DequantizeRow(wf, 1, r.data());
  EXPECT_EQ(r, (std::vector<float>{4, 5, 6}));
  const std::vector<uint16_t> bf = {0x3F80, 0xC040, 0x4000, 0x3E00, 0x0000, 0xBF00};
  wf.format = WeightFormat::kBF16;
  wf.data = reinterpret_cast<const uint8_t*>(bf.data());
  DequantizeRow(wf, 1, r.data());
  EXPECT_EQ(r, (std::vector<float>{0.125f, 0.0f, -0.5f}));
  DequantizeRow(wf, 0, r.data());
  EXPECT_EQ(r, (std::vector<float>{1.0f, -3.0f, 2.0f}));
}

}  // namespace
}  // namespace deepinfer
