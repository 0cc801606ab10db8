// RoPE tables (plain and the V4-Flash YaRN blend of reference §1.3) and interleaved-pair
// rotation, checked against frequencies and angles computed in double.
#include "engine/model/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace deepinfer {
namespace {

YarnParams FlashYarn() {
  YarnParams y;
  y.enabled = true;
  y.factor = 16;
  y.original_max_position = 65536;
  y.beta_fast = 32;
  y.beta_slow = 1;
  return y;
}

double PlainFreq(int i, int d, double theta) { return std::pow(theta, -2.0 * i / d); }

TEST(RopeTest, PlainFrequencies) {
  for (int d : {16, 64}) {
    const RopeTable t = MakePlainRope(d, 10000.0);
    EXPECT_EQ(t.rope_dim, d);
    ASSERT_EQ(t.inv_freq.size(), static_cast<size_t>(d / 2));
    EXPECT_EQ(t.inv_freq[0], 1.0f);
    for (int i = 0; i < d / 2; ++i) {
      const double want = PlainFreq(i, d, 10000.0);
      EXPECT_NEAR(t.inv_freq[i], want, 2e-6 * want) << d << " pair " << i;
    }
  }
}

TEST(RopeTest, YarnFlashTable) {
  const RopeTable t = MakeYarnRope(64, 160000.0, FlashYarn());
  ASSERT_EQ(t.inv_freq.size(), 32u);
  // §1.3: low = floor(15.45) = 15, high = ceil(24.71) = 25.
  for (int i = 0; i < 32; ++i) {
    const double f = PlainFreq(i, 64, 160000.0);
    double want;
    if (i <= 15) {
      want = f;
    } else if (i >= 25) {
      want = f / 16;
    } else {
      const double ramp = (i - 15) / 10.0;
      want = f * (1 - ramp) + f / 16 * ramp;
    }
    EXPECT_NEAR(t.inv_freq[i], want, 2e-6 * want) << "pair " << i;
  }
  // A blended pair really lies strictly between the two ends.
  const double f20 = PlainFreq(20, 64, 160000.0);
  EXPECT_LT(t.inv_freq[20], f20 * 0.99);
  EXPECT_GT(t.inv_freq[20], f20 / 16 * 1.01);
}

TEST(RopeTest, YarnDisabledIsPlain) {
  YarnParams off = FlashYarn();
  off.enabled = false;
  EXPECT_EQ(MakeYarnRope(64, 160000.0, off).inv_freq, MakePlainRope(64, 160000.0).inv_freq);
}

TEST(RopeTest, ApplyRotatesInterleavedPairs) {
  RopeTable t;
  t.rope_dim = 4;
  t.inv_freq = {static_cast<float>(M_PI / 4), static_cast<float>(M_PI / 6)};
  float x[4] = {1, 2, 3, 4};
  t.Apply(x, 2, false);  // pair 0 by pi/2, pair 1 by pi/3
  // (a, b) -> (a cos - b sin, b cos + a sin), pairs (x0, x1) and (x2, x3), not half-split.
  EXPECT_NEAR(x[0], -2.0, 1e-6);
  EXPECT_NEAR(x[1], 1.0, 1e-6);
  EXPECT_NEAR(x[2], 1.5 - 2 * std::sqrt(3.0), 1e-6);
  EXPECT_NEAR(x[3], 2 + 1.5 * std::sqrt(3.0), 1e-6);

  float y[4] = {1, 2, 3, 4};
  t.Apply(y, 2, true);  // rotation by -angle
  EXPECT_NEAR(y[0], 2.0, 1e-6);
  EXPECT_NEAR(y[1], -1.0, 1e-6);
  EXPECT_NEAR(y[2], 1.5 + 2 * std::sqrt(3.0), 1e-6);
  EXPECT_NEAR(y[3], 2 - 1.5 * std::sqrt(3.0), 1e-6);
}

TEST(RopeTest, InverseUndoesAndPreservesNorm) {
  const RopeTable t = MakeYarnRope(64, 160000.0, FlashYarn());
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[i] = std::sin(1.7 * i) + 0.1f * i;
  for (int64_t pos : {0, 1, 77, 65535, 1000000}) {
    std::vector<float> y = x;
    t.Apply(y.data(), pos, false);
    for (int i = 0; i < 32; ++i) {
      // Angle formed in fp32 like the engine; rotation itself checked in double.
      const double a = static_cast<float>(pos) * t.inv_freq[i];
      const double c = std::cos(a), s = std::sin(a);
      EXPECT_NEAR(y[2 * i], x[2 * i] * c - x[2 * i + 1] * s, 1e-5) << pos << " " << i;
      EXPECT_NEAR(y[2 * i + 1], x[2 * i + 1] * c + x[2 * i] * s, 1e-5) << pos << " " << i;
      EXPECT_NEAR(std::hypot(y[2 * i], y[2 * i + 1]), std::hypot(x[2 * i], x[2 * i + 1]), 1e-5);
    }
    if (pos == 0) {
      EXPECT_EQ(y, x);
    }
    t.Apply(y.data(), pos, true);
    for (int i = 0; i < 64; ++i) EXPECT_NEAR(y[i], x[i], 1e-5) << pos << " " << i;
  }
}

TEST(RopeTest, LayerTables) {
  ModelConfig c;
  c.rope_dim = 64;
  c.rope_theta = 10000.0;
  c.compress_rope_theta = 160000.0;
  c.yarn = FlashYarn();
  const RopeTable sliding = MakeLayerRope(c, AttnType::kSliding);
  const RopeTable csa = MakeLayerRope(c, AttnType::kCsa);
  const RopeTable hca = MakeLayerRope(c, AttnType::kHca);
  ASSERT_EQ(sliding.inv_freq.size(), 32u);
  ASSERT_EQ(csa.inv_freq.size(), 32u);
  // Sliding layers: theta 1e4 and no ramp, even in the tail.
  EXPECT_NEAR(sliding.inv_freq[31], PlainFreq(31, 64, 1e4), 2e-6 * PlainFreq(31, 64, 1e4));
  EXPECT_NEAR(sliding.inv_freq[5], PlainFreq(5, 64, 1e4), 2e-6 * PlainFreq(5, 64, 1e4));
  // Compressed layers: theta 1.6e5 with the YaRN tail divided by 16.
  const double tail = PlainFreq(31, 64, 160000.0) / 16;
  EXPECT_NEAR(csa.inv_freq[31], tail, 2e-6 * tail);
  EXPECT_NEAR(csa.inv_freq[5], PlainFreq(5, 64, 160000.0), 2e-6 * PlainFreq(5, 64, 160000.0));
  EXPECT_EQ(hca.inv_freq, csa.inv_freq);
  EXPECT_EQ(csa.inv_freq, MakeYarnRope(64, 160000.0, c.yarn).inv_freq);
}

}  // namespace
}  // namespace deepinfer
