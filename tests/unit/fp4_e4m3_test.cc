// MXFP4 weights as e4m3 operands (kernels/fp4_e4m3.h), on the host: every e2m1 value becomes
// exactly 2^-6 times itself, shifting it up by 0..12 binades is exact with no carry between the
// bytes of a word, and four e8m0 scales fold into one exactly when their spread is at most 12.
#include "kernels/fp4_e4m3.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "engine/model/quant.h"

namespace deepinfer {
namespace {

// Weight k (0..7) of a word: the even ones in `even`'s bytes 0..3, the odd ones in `odd`'s.
float Operand(uint32_t even, uint32_t odd, int k) {
  const uint32_t reg = k % 2 == 0 ? even : odd;
  return E4M3ToF32(static_cast<uint8_t>(reg >> (8 * (k / 2))));
}

TEST(Fp4E4m3Test, EveryNibbleBecomesTwoToTheMinusSixTimesItself) {
  std::mt19937 rng(7);
  std::vector<uint32_t> words;
  for (uint32_t n = 0; n < 16; ++n) {
    for (int k = 0; k < 8; ++k) words.push_back(n << (4 * k));  // each nibble in each place
  }
  for (int i = 0; i < 1000; ++i) words.push_back(static_cast<uint32_t>(rng()));
  for (uint32_t w : words) {
    uint32_t even, odd;
    kernels::Fp4ToE4m3(w, &even, &odd);
    for (int k = 0; k < 8; ++k) {
      const float want = E2M1ToF32(static_cast<uint8_t>((w >> (4 * k)) & 0xf)) / 64.0f;
      EXPECT_EQ(Operand(even, odd, k), want) << std::hex << w << " weight " << k;
    }
  }
}

TEST(Fp4E4m3Test, ShiftsUpToTwelveAreExactAndStayInTheirBytes) {
  std::mt19937 rng(11);
  std::vector<uint32_t> words = {0u, 0xffffffffu, 0x88888888u, 0x11111111u, 0x77777777u};
  for (int i = 0; i < 2000; ++i) words.push_back(static_cast<uint32_t>(rng()));
  for (uint32_t w : words) {
    uint32_t even, odd;
    kernels::Fp4ToE4m3(w, &even, &odd);
    for (uint32_t shift = 0; shift <= 12; ++shift) {
      const uint32_t se = kernels::ShiftE4m3(even, shift), so = kernels::ShiftE4m3(odd, shift);
      for (int k = 0; k < 8; ++k) {
        const float want = std::ldexp(Operand(even, odd, k), static_cast<int>(shift));
        EXPECT_EQ(Operand(se, so, k), want)
            << std::hex << w << " weight " << k << std::dec << " shift " << shift;
      }
    }
  }
  // Past 12 the largest magnitude (6) would need e4m3's exponent field 16: not representable.
  EXPECT_GT(std::ldexp(6.0f / 64.0f, 13), 448.0f);
}

TEST(Fp4E4m3Test, FourScalesFoldWhenTheirSpreadIsAtMostTwelve) {
  uint8_t base = 0, shifts[4] = {};
  const uint8_t spread12[4] = {130, 118, 125, 121};
  ASSERT_TRUE(kernels::FoldScales(spread12, &base, shifts));
  EXPECT_EQ(base, 118);
  EXPECT_EQ(shifts[0], 12);
  EXPECT_EQ(shifts[1], 0);
  EXPECT_EQ(shifts[2], 7);
  EXPECT_EQ(shifts[3], 3);
  // The folded operand times 2^(base - 127 + 6) is the weight: scale 2^(s - 127) times e2m1.
  for (int j = 0; j < 4; ++j) {
    EXPECT_EQ(std::ldexp(1.0f, shifts[j] + base - 127), E8M0ToF32(spread12[j]));
  }
  const uint8_t spread13[4] = {131, 118, 125, 121}, nan[4] = {0xff, 0xff, 0xff, 0xff};
  EXPECT_FALSE(kernels::FoldScales(spread13, &base, shifts));
  EXPECT_FALSE(kernels::FoldScales(nan, &base, shifts));
  // 2^(base - 127) * 64 must stay finite in fp32: a base of 248 folds, 249 does not.
  const uint8_t high[4] = {248, 250, 254, 248}, too_high[4] = {249, 250, 254, 249};
  EXPECT_TRUE(kernels::FoldScales(high, &base, shifts));
  EXPECT_FALSE(kernels::FoldScales(too_high, &base, shifts));
  // A matrix folds when every row's every 128-wide block does.
  std::vector<uint8_t> scales(2 * 256 / 32, 120);  // [2 rows, 8 blocks of 32]
  EXPECT_TRUE(kernels::ScalesFold(scales.data(), 2, 256));
  scales[13] = 133;  // row 1, its second 128-wide block: spread 13
  EXPECT_FALSE(kernels::ScalesFold(scales.data(), 2, 256));
  scales[13] = 132;
  EXPECT_TRUE(kernels::ScalesFold(scales.data(), 2, 256));
}

}  // namespace
}  // namespace deepinfer
