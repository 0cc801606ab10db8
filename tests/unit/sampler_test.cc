// Sampling: greedy, the counter-based random stream, temperature/top-k/top-p/min-p, determinism.
#include "engine/sampling/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/sample_pick.h"

namespace deepinfer {
namespace {

// Every id in the candidates' order: descending logit by DescendingKey, ties by lower id (a
// stable sort of the ids in order).
std::vector<int32_t> CandidateOrder(const std::vector<float>& logits) {
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return DescendingKey(logits[a]) < DescendingKey(logits[b]);
  });
  return order;
}

TEST(SamplerTest, GreedyIsArgmaxWithLowerIdOnTies) {
  std::vector<int32_t> scratch;
  const float logits[] = {0.5f, 2.0f, -1.0f, 2.0f};
  SamplingConfig greedy{.temperature = 0.0f};
  EXPECT_EQ(SampleToken(logits, 4, greedy, 1, 0, scratch), 1);
  SamplingConfig k1{.temperature = 1.0f, .top_k = 1};
  EXPECT_EQ(SampleToken(logits, 4, k1, 1, 0, scratch), 1);
}

// The candidates' order key both samplers sort by: ascending keys are descending logits, -0 ties
// +0, NaN has a place at either end, and the key gives its logit back.
TEST(SamplerTest, DescendingKeysOrderLogitsAndGiveThemBack) {
  const float nan = std::nanf("");
  const std::vector<float> descending = {nan,     INFINITY, 3.5f,   1.0f,      1e-40f, 0.0f,
                                         -1e-40f, -2.0f,    -1e30f, -INFINITY, -nan};
  for (size_t i = 0; i + 1 < descending.size(); ++i) {
    EXPECT_LT(DescendingKey(descending[i]), DescendingKey(descending[i + 1])) << i;
  }
  EXPECT_EQ(DescendingKey(-0.0f), DescendingKey(0.0f));
  for (float f : {3.5f, -2.0f, 1e-40f, -1e30f, INFINITY, -INFINITY}) {
    EXPECT_EQ(KeyLogit(DescendingKey(f)), f);
  }
  EXPECT_FALSE(std::signbit(KeyLogit(DescendingKey(-0.0f))));  // either zero comes back +0
  EXPECT_TRUE(std::isnan(KeyLogit(DescendingKey(nan))));
}

// The host's branch-free key is the device's key (the comparison form, written out here) for
// every sign and exponent and a spread of mantissas: the two samplers order candidates alike.
TEST(SamplerTest, HostKeyIsTheDeviceKey) {
  const auto device_form = [](float f) {
    if (f == 0.0f) f = 0.0f;
    uint32_t u;
    std::memcpy(&u, &f, sizeof(u));
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return ~u;
  };
  for (uint64_t top = 0; top < (1u << 9); ++top) {  // sign and exponent
    for (uint32_t m = 0; m < (1u << 23); m += 4093) {
      for (uint32_t low : {0u, 1u, (1u << 23) - 1}) {
        const uint32_t bits = static_cast<uint32_t>(top) << 23 | ((m + low) & ((1u << 23) - 1));
        float f;
        std::memcpy(&f, &bits, sizeof(f));
        ASSERT_EQ(DescendingKey(f), device_form(f)) << std::hex << bits;
      }
    }
  }
}

// NaN logits (a broken model's) take the sort keys' places, as on the GPU and in the radix
// sort: a positive NaN first, a negative one last (std::max_element kept a NaN at id 0 and
// skipped one anywhere else).
TEST(SamplerTest, NanLogitsTakeTheSortKeysPlaces) {
  std::vector<int32_t> scratch;
  std::vector<float> logits(3000);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(0.37f * static_cast<float>(i));
  const float positive_nan = std::nanf(""), negative_nan = -std::nanf("");
  logits[0] = negative_nan;
  const int32_t real_max =
      static_cast<int32_t>(std::max_element(logits.begin() + 1, logits.end()) - logits.begin());
  SamplingConfig greedy{.temperature = 0.0f};
  EXPECT_EQ(SampleToken(logits.data(), 3000, greedy, 1, 0, scratch), real_max);
  logits[1700] = positive_nan;
  EXPECT_EQ(SampleToken(logits.data(), 3000, greedy, 1, 0, scratch), 1700);
  SamplingConfig k1{.temperature = 1.0f, .top_k = 1};
  EXPECT_EQ(SampleToken(logits.data(), 3000, k1, 1, 0, scratch), 1700);
}

TEST(SamplerTest, DrawsDependOnlyOnSeedStreamAndPosition) {
  EXPECT_EQ(CounterUniform(1, 2, 3), CounterUniform(1, 2, 3));
  EXPECT_NE(CounterUniform(1, 2, 3), CounterUniform(1, 2, 4));
  EXPECT_NE(CounterUniform(1, 2, 3), CounterUniform(2, 2, 3));
  EXPECT_NE(CounterUniform(1, 2, 3), CounterUniform(1, 3, 3));
  for (uint64_t i = 0; i < 1000; ++i) {
    const double u = CounterUniform(7, 9, i);
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
  }
}

// The draw over a large vocabulary equals the draw computed here directly: with a top-p cut over
// the candidates in comparison-sort order (descending logit, ties by lower id; the sampler sorts
// them by radix), without one over the ids in order, with and without a min-p floor; with ties,
// both zeros and masked (-inf) tokens in the logits.
TEST(SamplerTest, LargeVocabularyDrawsFollowTheirOrder) {
  const int32_t vocab = 20000;
  std::vector<float> logits(vocab);
  uint64_t state = 42;
  for (int32_t i = 0; i < vocab; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const int bucket = static_cast<int>((state >> 33) % 64);
    logits[i] = bucket == 0   ? -INFINITY
                : bucket == 1 ? -0.0f
                : bucket == 2 ? 0.0f
                              : static_cast<float>(bucket - 32) * 0.25f;  // many exact ties
  }
  std::vector<int32_t> sorted(vocab), by_id(vocab);
  for (int32_t i = 0; i < vocab; ++i) sorted[i] = by_id[i] = i;
  std::sort(sorted.begin(), sorted.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  const double top = logits[sorted[0]];
  for (float temperature : {0.3f, 1.0f, 4.0f}) {
    for (float top_p : {1.0f, 0.9f}) {
      for (float min_p : {0.0f, 0.05f}) {
        if (top_p < 1.0f && min_p > 0.0f) continue;  // TopKTopPAndMinP… covers them together
        SamplingConfig cfg{.temperature = temperature, .top_p = top_p, .min_p = min_p, .seed = 5};
        const std::vector<int32_t>& order = top_p < 1.0f ? sorted : by_id;
        std::vector<double> p(vocab);
        double sum = 0;
        for (int32_t i = 0; i < vocab; ++i) {
          p[i] = std::exp((logits[order[i]] - top) * (1.0 / double{temperature}));
          if (p[i] < min_p) p[i] = 0;
          sum += p[i];
        }
        int32_t keep = vocab;
        if (top_p < 1.0f) {
          double acc = 0;
          for (int32_t i = 0; i < vocab; ++i) {
            acc += p[i];
            if (acc >= top_p * sum) {
              keep = i + 1;
              sum = acc;
              break;
            }
          }
        }
        std::vector<int32_t> scratch;
        for (uint64_t pos = 0; pos < 200; ++pos) {
          const double u = CounterUniform(5, 3, pos) * sum;
          double acc = 0;
          int32_t want = -1;
          for (int32_t i = 0; i < keep && want < 0; ++i) {
            acc += p[i];
            if (u < acc) want = order[i];
          }
          ASSERT_GE(want, 0);
          ASSERT_EQ(SampleToken(logits.data(), vocab, cfg, 3, pos, scratch), want)
              << "temperature " << temperature << " top_p " << top_p << " min_p " << min_p
              << " position " << pos;
        }
      }
    }
  }
}

// The id-order walk's edges: a draw just below the total still lands on a token of mass, never
// on a masked one after it; sums of 0 (only PickInIdOrder's own edge) draw id 0, NaN sums
// (NaN logits, a row with every token masked) the last id.
TEST(SamplerTest, IdOrderWalkLandsOnTokensOfMass) {
  const double almost_one = 1.0 - 1.0 / 9007199254740992.0;  // the largest draw
  const double prefix[] = {0.25, 0.75, 1.0, 1.0, 1.0};       // the last two: masked
  EXPECT_EQ(PickInIdOrder(prefix, 5, almost_one), 2);
  EXPECT_EQ(PickInIdOrder(prefix, 5, 0.0), 0);
  EXPECT_EQ(PickInIdOrder(prefix, 5, 0.5), 1);
  const double none[] = {0.0, 0.0, 0.0};
  EXPECT_EQ(PickInIdOrder(none, 3, 0.5), 0);
  const double nan[] = {std::nan(""), std::nan(""), std::nan("")};
  EXPECT_EQ(PickInIdOrder(nan, 3, 0.5), 2);
  // Through SampleToken: ids after the last allowed one are masked, and no draw reaches them.
  std::vector<float> logits(3000, -INFINITY);
  for (int32_t i = 0; i < 1500; ++i) logits[i] = std::sin(0.1f * static_cast<float>(i));
  std::vector<int32_t> scratch;
  SamplingConfig cfg{.temperature = 1.0f, .seed = 11};
  for (uint64_t pos = 0; pos < 2000; ++pos)
    ASSERT_LT(SampleToken(logits.data(), 3000, cfg, 1, pos, scratch), 1500) << pos;
}

// Sampling frequencies over many positions follow softmax(logits / T).
TEST(SamplerTest, FrequenciesFollowTheTemperedSoftmax) {
  const float logits[] = {1.0f, 0.0f, -1.0f, 0.5f};
  SamplingConfig cfg{.temperature = 0.7f, .seed = 42};
  std::vector<int32_t> scratch;
  std::map<int32_t, int> count;
  const int n = 200000;
  for (int i = 0; i < n; ++i) count[SampleToken(logits, 4, cfg, 5, i, scratch)]++;
  double z = 0;
  for (float l : logits) z += std::exp(l / 0.7);
  for (int t = 0; t < 4; ++t) {
    const double expected = std::exp(logits[t] / 0.7) / z;
    EXPECT_NEAR(count[t] / static_cast<double>(n), expected, 0.005) << "token " << t;
  }
}

TEST(SamplerTest, TopKTopPAndMinPRestrictTheCandidates) {
  const float logits[] = {3.0f, 2.9f, 0.0f, -5.0f, 2.8f};
  std::vector<int32_t> scratch;
  auto seen = [&](const SamplingConfig& cfg) {
    std::map<int32_t, int> c;
    for (int i = 0; i < 20000; ++i) c[SampleToken(logits, 5, cfg, 1, i, scratch)]++;
    return c;
  };
  auto k2 = seen({.temperature = 1.0f, .top_k = 2});
  EXPECT_EQ(k2.size(), 2u);
  EXPECT_TRUE(k2.count(0) && k2.count(1));
  // The three near-equal logits hold ~97% of the mass: top_p 0.5 keeps the first two.
  auto p = seen({.temperature = 1.0f, .top_p = 0.5f});
  EXPECT_EQ(p.size(), 2u);
  auto m = seen({.temperature = 1.0f, .min_p = 0.5f});
  EXPECT_EQ(m.size(), 3u);
  EXPECT_FALSE(m.count(2));
}

}  // namespace
}  // namespace deepinfer

namespace deepinfer {
namespace {

TEST(LogitProcessorsTest, PenaltiesAndBias) {
  TokenHistory h;
  h.AddPrompt(0);
  h.AddOutput(1);
  h.AddOutput(1);
  h.AddOutput(2);
  SamplingConfig cfg;
  cfg.repetition_penalty = 2.0f;
  cfg.frequency_penalty = 0.5f;
  cfg.presence_penalty = 1.0f;
  cfg.logit_bias = {{3, -100.0f}, {99, 5.0f}};  // an id past the vocabulary is ignored
  float l[4] = {4.0f, -2.0f, 1.0f, 3.0f};
  ApplyLogitProcessors(l, 4, cfg, h);
  EXPECT_FLOAT_EQ(l[0], 2.0f);                     // prompt only: repetition divides
  EXPECT_FLOAT_EQ(l[1], -4.0f - 2 * 0.5f - 1.0f);  // negative: multiplied, then 2x freq + presence
  EXPECT_FLOAT_EQ(l[2], 0.5f - 0.5f - 1.0f);
  EXPECT_FLOAT_EQ(l[3], -97.0f);
  std::vector<int32_t> scratch;
  SamplingConfig greedy{.temperature = 0};
  EXPECT_NE(SampleToken(l, 4, greedy, 1, 0, scratch), 3);
}

TEST(LogitProcessorsTest, LogprobsAreNormalisedAndRanked) {
  const float l[5] = {1.0f, 3.0f, 3.0f, -1.0f, 0.0f};
  TokenLogprobs lp;
  ComputeLogprobs(l, 5, 4, 3, &lp);
  double total = 0;
  for (float x : l) total += std::exp(x);
  EXPECT_NEAR(lp.chosen, 0.0 - std::log(total), 1e-5);
  ASSERT_EQ(lp.top.size(), 3u);
  EXPECT_EQ(lp.top[0].first, 1);  // tie at 3.0: lower id first
  EXPECT_EQ(lp.top[1].first, 2);
  EXPECT_EQ(lp.top[2].first, 0);
  EXPECT_NEAR(std::exp(lp.top[0].second) + std::exp(lp.top[1].second), 2 * std::exp(3.0) / total,
              1e-5);
}

// The nucleus cut from the first 128 sorted candidates and a total summed in another order (here
// id order; the GPU's NucleusRows sums it by a block reduction) is the sorted sampler's cut
// whenever it is decided, and it is decided wherever the nucleus ends among those 128: V4's
// vocabulary, flat and peaked rows, several top-p. The two totals themselves stay within
// SumOrderSlack of each other.
TEST(SamplerTest, TopPCutFromAnIdOrderTotalIsTheSortedCut) {
  constexpr int32_t kVocab = 129280, kKnown = 128;
  std::mt19937 rng(11);
  int decided = 0, fitting = 0;
  for (float spread : {3.0f, 8.0f}) {
    for (float temperature : {0.5f, 1.0f}) {
      std::normal_distribution<float> normal(0.0f, spread);
      std::vector<float> logits(kVocab);
      for (float& v : logits) v = normal(rng);
      const std::vector<int32_t> order = CandidateOrder(logits);
      const double top = logits[order[0]], inv_t = 1.0 / temperature;
      std::vector<double> sorted(kVocab), by_id(kVocab), prefix(kVocab), id_prefix(kVocab);
      for (int32_t i = 0; i < kVocab; ++i) {
        by_id[i] = std::exp((logits[i] - top) * inv_t);
        sorted[i] = std::exp((logits[order[i]] - top) * inv_t);
      }
      ChunkedPrefix(sorted.data(), kVocab, prefix.data());
      ChunkedPrefix(by_id.data(), kVocab, id_prefix.data());
      const double total = prefix[kVocab - 1], id_total = id_prefix[kVocab - 1];
      const double slack = SumOrderSlack(kVocab);
      EXPECT_LE(std::fabs(total - id_total), slack * id_total);
      for (float top_p : {0.5f, 0.9f, 0.95f}) {
        const int32_t want = FirstPast(prefix.data(), kVocab, top_p * total, true);
        const int32_t got = TopPCutWithin(prefix.data(), kKnown, id_total, slack, top_p);
        SCOPED_TRACE(testing::Message() << "spread " << spread << " T " << temperature << " top_p "
                                        << top_p << " cut " << want);
        if (want < kKnown) {
          ++fitting;
          EXPECT_EQ(got, want);
        } else {
          EXPECT_EQ(got, -1);
        }
        decided += got >= 0;
      }
    }
  }
  EXPECT_GT(fitting, 0);   // the peaked rows' nuclei fit
  EXPECT_LT(fitting, 12);  // and the flat ones' do not
  EXPECT_EQ(decided, fitting);
}

// A top-p draw without top-k first tries the nucleus among the first 2,048 candidates
// (NucleusDraw): where it decides, its token is the sorted draw's (PickCandidate over every
// candidate in comparison-sort order, as SampleToken's sort draws), and SampleToken's token is
// that draw's either way. It decides wherever the row is peaked (its nucleus fits) or a min-p
// floor keeps fewer than 2,048 ids, and leaves a flat row's wide nucleus (top-p 0.9 at T 1) to the
// sort.
TEST(SamplerTest, NucleusDrawIsTheSortedDrawWhereItDecides) {
  constexpr int32_t kVocab = 129280;
  std::mt19937 rng(7);
  for (float spread : {3.0f, 8.0f}) {
    std::normal_distribution<float> normal(0.0f, spread);
    std::vector<float> logits(kVocab);
    for (float& v : logits) v = normal(rng);
    const std::vector<int32_t> order = CandidateOrder(logits);
    for (float temperature : {0.5f, 1.0f}) {
      const double top = logits[order[0]], inv_t = 1.0 / temperature;
      std::vector<double> p(kVocab), prefix(kVocab);
      for (int32_t i = 0; i < kVocab; ++i) p[i] = std::exp((logits[order[i]] - top) * inv_t);
      ChunkedPrefix(p.data(), kVocab, prefix.data());
      for (float top_p : {0.5f, 0.9f}) {
        for (float min_p : {0.0f, 0.02f}) {
          SCOPED_TRACE(testing::Message() << "spread " << spread << " T " << temperature
                                          << " top_p " << top_p << " min_p " << min_p);
          const SamplingConfig cfg{
              .temperature = temperature, .top_p = top_p, .min_p = min_p, .seed = 9};
          int decided = 0;
          std::vector<int32_t> scratch;
          for (uint64_t pos = 0; pos < 16; ++pos) {
            const double u = CounterUniform(9, 2, pos);
            const int32_t want =
                order[PickCandidate(p.data(), prefix.data(), kVocab, min_p, top_p, u)];
            const int32_t got = NucleusDraw(logits.data(), kVocab, cfg, 2, pos);
            if (got >= 0) {
              ++decided;
              EXPECT_EQ(got, want) << "position " << pos;
            }
            EXPECT_EQ(SampleToken(logits.data(), kVocab, cfg, 2, pos, scratch), want)
                << "position " << pos;
          }
          if (spread == 8.0f || min_p > 0.0f) {
            EXPECT_EQ(decided, 16);  // peaked, or a floor
          }
          if (spread == 3.0f && temperature == 1.0f && top_p == 0.9f && min_p == 0.0f) {
            EXPECT_EQ(decided, 0);  // flat: that nucleus holds thousands of ids
          }
        }
      }
    }
  }
  SamplingConfig top_k{.temperature = 1.0f, .top_p = 0.9f, .top_k = 50};
  const std::vector<float> row(1000, 0.5f);
  EXPECT_EQ(NucleusDraw(row.data(), 1000, top_k, 0, 0), -1);  // a top-k sorts its candidates
}

// The nucleus among the candidates on rows a grammar or a quantised model makes: most ids masked
// (-inf), and logits on a coarse grid (long runs of ties, ordered by id): the sorted draw's token
// wherever it decides, and it decides on every such row here.
TEST(SamplerTest, NucleusDrawOnMaskedAndTiedRows) {
  constexpr int32_t kVocab = 129280;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 6.0f);
  for (int shape = 0; shape < 3; ++shape) {
    std::vector<float> logits(kVocab);
    for (int32_t i = 0; i < kVocab; ++i) {
      const float v = normal(rng);
      logits[i] = shape == 0   ? (i % 10 == 0 ? v : -INFINITY)  // 90 % masked
                  : shape == 1 ? std::round(v * 2.0f) / 2.0f    // ties
                               : (i < 100 ? v : -INFINITY);     // fewer ids than candidates
    }
    const std::vector<int32_t> order = CandidateOrder(logits);
    const double top = logits[order[0]];
    std::vector<double> p(kVocab), prefix(kVocab);
    const double inv_t = 1.0 / double{0.8f};  // SampleToken's, from the float temperature
    for (int32_t i = 0; i < kVocab; ++i) p[i] = std::exp((logits[order[i]] - top) * inv_t);
    ChunkedPrefix(p.data(), kVocab, prefix.data());
    const SamplingConfig cfg{.temperature = 0.8f, .top_p = 0.9f, .seed = 3};
    std::vector<int32_t> scratch;
    for (uint64_t pos = 0; pos < 16; ++pos) {
      SCOPED_TRACE(testing::Message() << "shape " << shape << " position " << pos);
      const double u = CounterUniform(3, 1, pos);
      const int32_t want = order[PickCandidate(p.data(), prefix.data(), kVocab, 0.0f, 0.9f, u)];
      EXPECT_EQ(NucleusDraw(logits.data(), kVocab, cfg, 1, pos), want);
      EXPECT_EQ(SampleToken(logits.data(), kVocab, cfg, 1, pos, scratch), want);
    }
  }
}

// Random rows, shapes and settings: SampleToken's top-p draw is the sorted draw, and NucleusDraw
// where it decides — spreads from flat to peaked, masks, coarse grids of ties, temperatures and
// floors (400 rows of 5,000 ids, so more than the 2,048 candidates).
TEST(SamplerTest, NucleusDrawMatchesTheSortOnRandomRows) {
  constexpr int32_t kVocab = 5000;
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  int decided = 0;
  for (int row = 0; row < 400; ++row) {
    const float spread = 0.3f + 12.0f * unit(rng), masked = unit(rng) < 0.3f ? unit(rng) : 0.0f;
    const bool grid = unit(rng) < 0.3f;
    std::normal_distribution<float> normal(0.0f, spread);
    std::vector<float> logits(kVocab);
    for (float& v : logits) {
      v = unit(rng) < masked ? -INFINITY : normal(rng);
      if (grid && std::isfinite(v)) v = std::round(v * 4.0f) / 4.0f;
    }
    if (masked >= 1.0f ||
        std::none_of(logits.begin(), logits.end(), [](float v) { return std::isfinite(v); })) {
      logits[0] = 0.0f;
    }
    const float temperature = 0.2f + 1.6f * unit(rng), top_p = 0.05f + 0.9f * unit(rng);
    const float min_p = unit(rng) < 0.3f ? 0.2f * unit(rng) : 0.0f;
    const SamplingConfig cfg{
        .temperature = temperature, .top_p = top_p, .min_p = min_p, .seed = uint64_t(row)};
    const std::vector<int32_t> order = CandidateOrder(logits);
    const double top = logits[order[0]], inv_t = 1.0 / temperature;
    std::vector<double> p(kVocab), prefix(kVocab);
    for (int32_t i = 0; i < kVocab; ++i) p[i] = std::exp((logits[order[i]] - top) * inv_t);
    ChunkedPrefix(p.data(), kVocab, prefix.data());
    const double u = CounterUniform(cfg.seed, 4, 0);
    const int32_t want = order[PickCandidate(p.data(), prefix.data(), kVocab, min_p, top_p, u)];
    SCOPED_TRACE(testing::Message() << "row " << row << " spread " << spread << " T " << temperature
                                    << " top_p " << top_p << " min_p " << min_p);
    const int32_t got = NucleusDraw(logits.data(), kVocab, cfg, 4, 0);
    if (got >= 0) {
      ++decided;
      ASSERT_EQ(got, want);
    }
    std::vector<int32_t> scratch;
    ASSERT_EQ(SampleToken(logits.data(), kVocab, cfg, 4, 0, scratch), want);
  }
  EXPECT_GT(decided, 200);  // most rows decide
}

// A total whose top-p share lands within the slack of a prefix sum leaves the cut undecided: one
// end of the interval cuts there, the other at the next candidate.
TEST(SamplerTest, TopPCutOnTheSlacksEdgeIsUndecided) {
  const float top_p = 0.3f;
  const double total = 10.0, at = top_p * total;  // what a total of exactly 10 cuts at
  const std::vector<double> prefix = {1.0, 2.0, at, 4.0, 5.0};
  const double slack = SumOrderSlack(129280);
  EXPECT_EQ(TopPCutWithin(prefix.data(), 5, total, slack, top_p), -1);
  EXPECT_EQ(TopPCutWithin(prefix.data(), 5, total, 0.0, top_p), 2);    // an exact total decides
  EXPECT_EQ(TopPCutWithin(prefix.data(), 3, 15.0, slack, top_p), -1);  // 4.5 lies past 3 known
  EXPECT_EQ(TopPCutWithin(prefix.data(), 5, 15.0, slack, top_p), 4);
}

}  // namespace
}  // namespace deepinfer
