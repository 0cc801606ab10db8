// The integer forms of the exact one-token expert GEMV (kernels/int_limbs.h), on the host: the
// e2m1 decode for every 16-bit input, the limb split for every q the kernels can meet, and a
// block sum through DP4A's byte products equal to the plain integer sum.
#include "kernels/int_limbs.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>

#include "engine/model/quant.h"

namespace deepinfer {
namespace {

constexpr int32_t kMaxQ = 448 * 512;  // e4m3's largest value in units of its smallest, 2^-9

TEST(IntLimbsTest, BytePermPicksBytesAndReplicatesSigns) {
  EXPECT_EQ(kernels::BytePerm(0x44332211u, 0x88776655u, 0x7531u), 0x88664422u);
  EXPECT_EQ(kernels::BytePerm(0x44332211u, 0x88776655u, 0x0004u), 0x11111155u);
  // Selector bit 3: the chosen byte's sign bit fills the byte (0x44 -> 0x00, 0x88 -> 0xff).
  EXPECT_EQ(kernels::BytePerm(0x44332211u, 0x88776655u, 0x00fbu), 0x1111ff00u);
}

TEST(IntLimbsTest, DoubledE2m1MatchesTheDequantiserForEveryInput) {
  for (uint32_t nib = 0; nib < 0x10000u; ++nib) {
    // Bits above 16 must not matter: the kernel passes whole words shifted down.
    const uint32_t bytes = kernels::DoubledE2m1x4(nib | 0xabcd0000u);
    for (int k = 0; k < 4; ++k) {
      const auto got = static_cast<int8_t>(bytes >> (8 * k));
      const float want = 2.0f * E2M1ToF32(static_cast<uint8_t>((nib >> (4 * k)) & 0xf));
      ASSERT_EQ(static_cast<float>(got), want) << "nibbles " << std::hex << nib << " weight " << k;
    }
  }
}

// The one-word decode gives the two half-word decodes: every low half with varied high halves,
// and every high half with varied low halves.
TEST(IntLimbsTest, OneWordDecodeIsTheTwoHalfWordDecodes) {
  std::mt19937 rng(11);
  for (uint32_t half = 0; half < 0x10000u; ++half) {
    for (const uint32_t word : {half | (rng() << 16), (half << 16) | (rng() & 0xffffu)}) {
      uint32_t lo, hi;
      kernels::DoubledE2m1x8(word, &lo, &hi);
      ASSERT_EQ(lo, kernels::DoubledE2m1x4(word)) << std::hex << word;
      ASSERT_EQ(hi, kernels::DoubledE2m1x4(word >> 16)) << std::hex << word;
    }
  }
}

TEST(IntLimbsTest, LimbsJoinBackToEveryQ) {
  for (int32_t q = -kMaxQ; q <= kMaxQ; ++q) {
    uint32_t low, mid, top;
    kernels::SplitLimbs(q, &low, &mid, &top);
    ASSERT_LE(low | mid | top, 0xffu);
    ASSERT_EQ(kernels::JoinLimbSums(static_cast<int32_t>(low), static_cast<int32_t>(mid),
                                    static_cast<int8_t>(top)),
              q);
  }
}

// DP4A as the kernel uses it: signed weight bytes times unsigned (low, mid) or signed (top) limbs.
int32_t Dp4a(uint32_t w, uint32_t x, bool x_signed, int32_t c) {
  for (int k = 0; k < 4; ++k) {
    const int32_t wk = static_cast<int8_t>(w >> (8 * k));
    const int32_t xk =
        x_signed ? static_cast<int8_t>(x >> (8 * k)) : static_cast<int32_t>((x >> (8 * k)) & 0xff);
    c += wk * xk;
  }
  return c;
}

TEST(IntLimbsTest, BlockSumsThroughLimbsEqualTheIntegerSums) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20000; ++trial) {
    // 32 weights (four words of nibbles) and 32 values of q, extremes included.
    uint32_t words[4];
    for (uint32_t& w : words) w = static_cast<uint32_t>(rng());
    int32_t q[32];
    for (int32_t& v : q) {
      const uint32_t pick = rng() % 8;
      v = pick == 0   ? kMaxQ
          : pick == 1 ? -kMaxQ
                      : static_cast<int32_t>(rng() % (2 * kMaxQ + 1)) - kMaxQ;
    }
    int64_t want = 0;
    int32_t sums[3] = {0, 0, 0};
    for (int word = 0; word < 4; ++word) {
      for (int half = 0; half < 2; ++half) {
        const uint32_t weights = kernels::DoubledE2m1x4(words[word] >> (16 * half));
        uint32_t planes[3] = {0, 0, 0};
        for (int k = 0; k < 4; ++k) {
          const int32_t v = q[8 * word + 4 * half + k];
          uint32_t limb[3];
          kernels::SplitLimbs(v, &limb[0], &limb[1], &limb[2]);
          for (int p = 0; p < 3; ++p) planes[p] |= limb[p] << (8 * k);
          want += int64_t{static_cast<int8_t>(weights >> (8 * k))} * v;
        }
        for (int p = 0; p < 3; ++p) sums[p] = Dp4a(weights, planes[p], p == 2, sums[p]);
      }
    }
    ASSERT_EQ(kernels::JoinLimbSums(sums[0], sums[1], sums[2]), want) << "trial " << trial;
  }
}

}  // namespace
}  // namespace deepinfer
