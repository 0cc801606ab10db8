// The folded MXFP4 expert GEMM on wgmma against the CPU's dequantiser and double-precision sums
// over the FP8-rounded activations: experts in runs that cross windows, partial groups, shapes
// that are not multiples of the 128-row tile, outputs poisoned before the launch. Then what the
// device forward relies on: a token's sums do not depend on the tokens it shares a block with,
// the pair launch is two single launches, groups past the live count write nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/model/quant.h"
#include "engine/model/weights.h"
#include "kernels/expert_fp4_wgmma.h"
#include "kernels/fp4_e4m3.h"
#include "kernels/gemm_fp8.h"
#include "tests/gpu/expert_groups.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/unit/test_util.h"

namespace deepinfer {
namespace {

using testing::DeviceVector;

// The tensor cores sum each 128-column slice in an accumulator of ~14 significant bits
// (kernels/expert_fp4_wgmma.cu), truncating at each of its four 32-column steps: measured on the
// H200 up to 9.1e-4 of the products' magnitudes (the bound, 2e-3, as a fraction of the sum of
// |products|). The exact test below checks every weight where the sums fit the accumulator.
constexpr double kBound = 2e-3;

// Random experts whose scales fold (every 128-wide block's four exponents within 12 of each
// other, some at exactly 12), random tokens on the device as the kernel takes them.
class ExpertFp4WgmmaGpuTest : public testing::DeviceTest {
 protected:
  const uint32_t seed_ = std::random_device{}();  // fresh data each run, reported on failure
  std::mt19937 rng_{seed_};

  struct Experts {
    std::vector<std::vector<uint8_t>> w, s;
    const uint8_t* const* dw = nullptr;
    const uint8_t* const* ds = nullptr;
  };
  // exact: each 128-column block of a row has either all four 32-weight blocks live at the
  // row's base exponent, or one live block (the others zero or negative zero) at a random shift
  // of up to 12 over it; every block of the row shares the base. Each slice's sum then fits the
  // tensor cores' accumulator exactly (at most 128 products of at most 24 units: 12 bits).
  Experts MakeExperts(int count, int64_t out, int64_t in, bool exact = false) {
    Experts e;
    std::vector<const uint8_t*> dw, ds;
    for (int i = 0; i < count; ++i) {
      e.w.emplace_back(out * in / 2);
      e.s.emplace_back(out * in / 32);
      for (auto& b : e.w.back()) b = static_cast<uint8_t>(rng_());
      auto& s = e.s.back();
      for (size_t b = 0; b < s.size(); b += 4) {
        if (exact) {
          const int lo = 112 + static_cast<int>((b / (in / 32)) % 8);  // the row's base
          if (rng_() % 2 == 0) {  // all four blocks live at the base: the steps' chain is exact
            std::fill_n(&s[b], 4, static_cast<uint8_t>(lo));
            continue;
          }
          const int live = static_cast<int>(rng_() % 4), shift = static_cast<int>(rng_() % 13);
          for (int j = 0; j < 4; ++j) {
            s[b + j] = static_cast<uint8_t>(lo + rng_() % 13);
            if (j != live) std::fill_n(&e.w.back()[(b + j) * 16], 16, rng_() % 2 ? 0x88 : 0);
          }
          s[b + live] = static_cast<uint8_t>(lo + shift);
          s[b + (live + 1 + rng_() % 3) % 4] = static_cast<uint8_t>(lo);
          continue;
        }
        const int lo = 110 + static_cast<int>(rng_() % 12);
        const int spread = rng_() % 4 == 0 ? 12 : static_cast<int>(rng_() % 13);
        for (int j = 0; j < 4; ++j) s[b + j] = static_cast<uint8_t>(lo + rng_() % (spread + 1));
        s[b + rng_() % 4] = static_cast<uint8_t>(lo);
        s[b + rng_() % 4] = static_cast<uint8_t>(lo + spread);
      }
      EXPECT_TRUE(kernels::ScalesFold(s.data(), out, in));
      dw.push_back(ToDevice(e.w.back()));
      ds.push_back(ToDevice(s));
    }
    e.dw = ToDevice(dw);
    e.ds = ToDevice(ds);
    return e;
  }

  // Groups of the given rows over experts drawn at random, sorted by expert (as
  // BuildExpertGroups writes them), token rows gathered and scattered out of order.
  std::vector<kernels::ExpertGroup> MakeGroups(const std::vector<int>& rows, int experts) {
    return testing::RandomExpertGroups(rows, experts, /*sorted_by_expert=*/true, rng_);
  }

  struct Tokens {
    std::vector<float> x;  // the FP8-rounded values the kernel multiplies
    uint8_t* xq = nullptr;
    float* xs = nullptr;
    int64_t padded = 0;
  };
  // exact: values in {0, +-1, +-2} with a 2 in every 128-block, so every block's FP8 scale is
  // the same power of two and every product a small multiple of one unit.
  Tokens MakeTokens(int total, int64_t in, bool exact = false) {
    Tokens t;
    std::normal_distribution<float> normal(0.0f, 1.0f);
    t.x.resize(total * in);
    for (size_t i = 0; i < t.x.size(); ++i) {
      t.x[i] = !exact ? normal(rng_) : i % 128 == 0 ? 2.0f : static_cast<float>(rng_() % 5) - 2;
    }
    t.padded = kernels::Fp8GemmPaddedRows(total);
    float* dx = ToDevice(t.x);
    t.xq = ToDevice(std::vector<uint8_t>(t.padded * in));
    t.xs = ToDevice(std::vector<float>(kernels::Fp8ActScaleCount(total, in)));
    EXPECT_EQ(kernels::QuantizeActFp8(dx, total, in, t.xq, t.xs, nullptr), 0);
    for (int r = 0; r < total; ++r) QdqFp8Blocks(&t.x[r * in], in, 128, 1e-4f);
    return t;
  }

  std::vector<float> Run(const Experts& e, int64_t out, int64_t in,
                         const std::vector<kernels::ExpertGroup>& groups, const Tokens& t,
                         int total, int32_t live = -1) {
    auto y = DeviceVector<float>::Poisoned(total * out);
    const int32_t* d_live = live >= 0 ? ToDevice(std::vector<int32_t>{live}) : nullptr;
    EXPECT_EQ(kernels::Fp4ExpertWgmma(e.dw, e.ds, out, in, ToDevice(groups),
                                      static_cast<int>(groups.size()), t.xq, t.xs, t.padded,
                                      y.get(), nullptr, d_live),
              0);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    return y.ToHost();
  }

  // Every written value against the CPU's dequantised rows and a double sum; groups from `live`
  // on (and malformed ones) must stay poisoned.
  void ExpectCpuSums(const Experts& e, int64_t out, int64_t in,
                     const std::vector<kernels::ExpertGroup>& groups, const Tokens& t,
                     const std::vector<float>& y, int32_t live = -1) {
    SCOPED_TRACE("seed " + std::to_string(seed_));
    double worst = 0;  // the largest error as a fraction of the magnitudes, for the XML report
    std::string where;
    std::vector<float> row(in);
    for (size_t gi = 0; gi < groups.size(); ++gi) {
      const kernels::ExpertGroup& g = groups[gi];
      if ((live >= 0 && static_cast<int32_t>(gi) >= live) || g.rows > kernels::kExpertGroupRows) {
        for (int r = 0; r < std::min(g.rows, kernels::kExpertGroupRows); ++r) {
          for (int64_t o = 0; o < out; ++o) ASSERT_TRUE(std::isnan(y[g.y_row[r] * out + o]));
        }
        continue;
      }
      const LinearWeight lw =
          testing::Fp4BlockView(out, in, e.w[g.expert].data(), e.s[g.expert].data());
      for (int64_t o = 0; o < out; ++o) {
        DequantizeRow(lw, o, row.data());
        for (int r = 0; r < g.rows; ++r) {
          double want = 0, mag = 0;
          for (int64_t i = 0; i < in; ++i) {
            const double p = static_cast<double>(row[i]) * t.x[g.x_row[r] * in + i];
            want += p;
            mag += std::fabs(p);
          }
          ASSERT_FALSE(std::isnan(y[g.y_row[r] * out + o])) << "out " << o << " row " << r;
          const double error = std::fabs(y[g.y_row[r] * out + o] - want) / (mag + 1e-30);
          if (error > worst) {
            worst = error;
            where = "out " + std::to_string(o) + " row " + std::to_string(r) + " expert " +
                    std::to_string(g.expert) + " shape " + std::to_string(out) + "x" +
                    std::to_string(in);
          }
        }
      }
    }
    RecordProperty("worst_error_of_magnitudes_" + std::to_string(out) + "x" + std::to_string(in),
                   std::to_string(worst));
    EXPECT_LE(worst, kBound) << where;
  }

  // Bit for bit the kernel's own order where each slice's sum is exact: the fp32 total takes one
  // slice at a time (a fused multiply-add of an exact term, one rounding each), so a float sum
  // of the exact double slice sums in column order is what the kernel must give.
  void ExpectSliceSums(const Experts& e, int64_t out, int64_t in,
                       const std::vector<kernels::ExpertGroup>& groups, const Tokens& t,
                       const std::vector<float>& y) {
    SCOPED_TRACE("seed " + std::to_string(seed_));
    std::vector<float> row(in);
    for (const kernels::ExpertGroup& g : groups) {
      const LinearWeight lw =
          testing::Fp4BlockView(out, in, e.w[g.expert].data(), e.s[g.expert].data());
      for (int64_t o = 0; o < out; ++o) {
        DequantizeRow(lw, o, row.data());
        for (int r = 0; r < g.rows; ++r) {
          float want = 0.0f;
          for (int64_t k0 = 0; k0 < in; k0 += 128) {
            double slice = 0;
            for (int64_t i = k0; i < k0 + 128; ++i) {
              slice += static_cast<double>(row[i]) * t.x[g.x_row[r] * in + i];
            }
            want = static_cast<float>(static_cast<double>(want) + slice);
          }
          ASSERT_EQ(y[g.y_row[r] * out + o], want) << "out " << o << " row " << r << " expert "
                                                   << g.expert << " shape " << out << "x" << in;
        }
      }
    }
  }
};

// Every weight's conversion (sign, negative zero, each magnitude at each shift of 0..12, the
// folded scale) shows: one wrong weight changes a sum that is otherwise exact.
TEST_F(ExpertFp4WgmmaGpuTest, ExactWhereEachSlicesSumFitsTheAccumulator) {
  const std::vector<int> rows = {8, 8, 8, 8, 8, 8, 8, 8, 8, 5, 8, 8, 3, 8, 8, 8, 8, 8, 1, 8};
  int total = 0;
  for (int r : rows) total += r;
  for (const int64_t in : {128, 1024}) {
    const Experts e = MakeExperts(3, 264, in, true);
    const auto groups = MakeGroups(rows, 3);
    const Tokens t = MakeTokens(total, in, true);
    ExpectSliceSums(e, 264, in, groups, t, Run(e, 264, in, groups, t, total));
  }
}

TEST_F(ExpertFp4WgmmaGpuTest, MatchesCpuDequantisedProducts) {
  struct Case {
    int64_t out, in;
    std::vector<int> rows;
    int experts;
  };
  const std::vector<Case> cases = {
      {300,
       640,
       {8, 8, 8, 3, 8, 8, 1, 8, 8, 8, 8, 5, 2, 8, 8, 8, 8, 8, 7},
       3},                                         // runs cross windows
      {256, 2048, std::vector<int>(24, 8), 2},     // two experts of many full groups
      {136, 128, {1, 2, 3, 4, 5, 6, 7, 8, 8}, 4},  // one slice; the tile's last rows past `out`
      {200, 384, {8, 0, 0, 8, 3, 0, 8, 8, 0, 0, 0, 0, 8, 8, 1, 0, 0, 8, 8, 8}, 3},  // empty groups
  };
  for (const Case& c : cases) {
    int total = 0;
    for (int r : c.rows) total += r;
    const Experts e = MakeExperts(c.experts, c.out, c.in);
    const auto groups = MakeGroups(c.rows, c.experts);
    const Tokens t = MakeTokens(total, c.in);
    ExpectCpuSums(e, c.out, c.in, groups, t, Run(e, c.out, c.in, groups, t, total));
  }
}

TEST_F(ExpertFp4WgmmaGpuTest, GroupsPastTheLiveCountAndMalformedOnesWriteNothing) {
  const std::vector<int> rows = {8, 8, 4, 8, 8, 8, 8, 8, 8, 6, 8, 8};
  int total = 0;
  for (int r : rows) total += r;
  const Experts e = MakeExperts(2, 200, 256);
  auto groups = MakeGroups(rows, 2);
  for (int i = 0; i < 10; ++i) {
    if (groups[i].rows == 8) {
      groups[i].rows = 9;  // malformed, inside a window that runs: written nowhere
      break;
    }
  }
  const Tokens t = MakeTokens(total, 256);
  ExpectCpuSums(e, 200, 256, groups, t, Run(e, 200, 256, groups, t, total, 10), 10);
}

// A token's sums are the same bits whether its group runs alone or in a window with others, and
// the pair launch gives each matrix's own launch, bit for bit.
TEST_F(ExpertFp4WgmmaGpuTest, SumsDoNotDependOnTheWindowAndPairIsTwoLaunches) {
  const int64_t out = 264, in = 384;
  const std::vector<int> rows = {8, 3, 8, 8, 5, 8, 8, 8, 8, 2, 8};
  int total = 0;
  for (int r : rows) total += r;
  const Experts e = MakeExperts(3, out, in);
  const auto groups = MakeGroups(rows, 3);
  const Tokens t = MakeTokens(total, in);
  const std::vector<float> together = Run(e, out, in, groups, t, total);
  std::vector<float> alone(total * out, std::nanf(""));
  for (const auto& g : groups) {
    const std::vector<float> y = Run(e, out, in, {g}, t, total);
    for (int r = 0; r < g.rows; ++r) {
      std::copy_n(&y[g.y_row[r] * out], out, &alone[g.y_row[r] * out]);
    }
  }
  ASSERT_EQ(std::memcmp(together.data(), alone.data(), together.size() * sizeof(float)), 0);

  const Experts e3 = MakeExperts(3, out, in);
  auto y1 = DeviceVector<float>::Poisoned(total * out);
  auto y3 = DeviceVector<float>::Poisoned(total * out);
  ASSERT_EQ(kernels::Fp4ExpertWgmmaPair(e.dw, e.ds, y1.get(), e3.dw, e3.ds, y3.get(), out, in,
                                        ToDevice(groups), static_cast<int>(groups.size()), t.xq,
                                        t.xs, t.padded, nullptr),
            0);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> single3 = Run(e3, out, in, groups, t, total);
  EXPECT_EQ(std::memcmp(y1.ToHost().data(), together.data(), together.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(y3.ToHost().data(), single3.data(), single3.size() * sizeof(float)), 0);
}

TEST_F(ExpertFp4WgmmaGpuTest, RejectsBadArguments) {
  // in not a multiple of 128, no rows, a negative count, padded rows not a multiple of 4.
  EXPECT_NE(kernels::Fp4ExpertWgmma(nullptr, nullptr, 16, 96, nullptr, 1, nullptr, nullptr, 16,
                                    nullptr, nullptr),
            0);
  EXPECT_NE(kernels::Fp4ExpertWgmma(nullptr, nullptr, 0, 128, nullptr, 1, nullptr, nullptr, 16,
                                    nullptr, nullptr),
            0);
  EXPECT_NE(kernels::Fp4ExpertWgmma(nullptr, nullptr, 16, 128, nullptr, -1, nullptr, nullptr, 16,
                                    nullptr, nullptr),
            0);
  EXPECT_NE(kernels::Fp4ExpertWgmma(nullptr, nullptr, 16, 128, nullptr, 1, nullptr, nullptr, 18,
                                    nullptr, nullptr),
            0);
  EXPECT_EQ(kernels::Fp4ExpertWgmma(nullptr, nullptr, 16, 128, nullptr, 0, nullptr, nullptr, 16,
                                    nullptr, nullptr),
            0);  // nothing to do
}

}  // namespace
}  // namespace deepinfer
