// The draws without a sort (kernels/sample_greedy.cu) against the sort-based SampleRows and the
// CPU sampler. GreedyRows: the same token for every greedy row, with grammar masks, ties on a
// coarse grid and across the row's slices, rows read through an index, small and V4-sized
// vocabularies; the picked tokens' log-probabilities where asked, 0 where not. IdOrderRows: the
// same for rows without a cut (temperatures, min-p floors) beside greedy ones, and for rows with
// NaN or infinite logits.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda_available.h"
#include "kernels/sampling.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/sampler_test_util.h"

namespace deepinfer {
namespace {

using testing::DeviceVector;

TEST(SampleGreedyGpuTest, PicksWhatTheSortAndTheCpuPick) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const uint32_t seed = std::random_device{}();  // printed with any failure
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  for (int32_t vocab : {1000, 129280, 262144}) {
    const int64_t rows = 12;
    testing::SamplerStep s = testing::RandomStep(rows, vocab, rng, [](int64_t r) {
      return (r / 2) % 2 == 1;  // rows 0, 4 and 8 stay unmasked for their checks below
    });
    for (int64_t r = 0; r < rows; ++r) {
      float* row = s.row(r);
      if (r == 0) row[vocab - 3] = row[5] = 100.0f;  // a tie between the first and last slices
      if (r == 4) row[vocab - 1] = 100.0f;           // the max in the last id
      if (r == 6) {
        for (int32_t i = 0; i < vocab; ++i) row[i] = -std::fabs(row[i]) - 1.0f;  // all negative
      }
      if (r == 8) {  // the max is zero twice: -0 ties +0, the lower id wins
        for (int32_t i = 0; i < vocab; ++i) row[i] = -std::fabs(row[i]) - 1.0f;
        row[7] = -0.0f;
        row[9] = 0.0f;
      }
      // Greedy by temperature or by top-k 1; two rows in three ask for the log-probability.
      s.params[r] = {r % 4 == 3 ? 0.8f : 0.0f,
                     1.0f,
                     0.0f,
                     r % 4 == 3 ? 1 : -1,
                     rng(),
                     static_cast<uint64_t>(r),
                     0,
                     static_cast<uint32_t>(r % 3 != 0)};
    }
    kernels::SamplerWorkspace ws;
    ASSERT_EQ(ws.Reserve(rows, vocab), 0);
    DeviceVector<float> dl(s.logits);
    const testing::Drawn greedy = testing::DrawOnDevice(kernels::GreedyRows, ws, dl.get(), s);
    const std::vector<int32_t>& got = greedy.ids;
    EXPECT_EQ(got, testing::DrawOnDevice(kernels::SampleRows, ws, dl.get(), s).ids)
        << "vocab " << vocab;
    testing::ExpectCpuPicks(s, got, greedy.logprobs);
    EXPECT_EQ(got[0], 5);  // the lower of the two ids
    EXPECT_EQ(got[4], vocab - 1);
    EXPECT_EQ(got[8], 7);
    testing::ExpectReversedPicks(kernels::GreedyRows, ws, dl.get(), s, got);
    // More rows than the workspace holds, or another vocabulary: refused.
    DeviceVector<kernels::SampleParams> dp(s.params);
    auto out = DeviceVector<int32_t>::Poisoned(rows + 1);
    EXPECT_NE(kernels::GreedyRows(ws, dl.get(), rows + 1, vocab, nullptr, dp.get(), nullptr,
                                  out.get(), nullptr, nullptr),
              0);
    EXPECT_NE(kernels::GreedyRows(ws, dl.get(), 1, vocab - 1, nullptr, dp.get(), nullptr, out.get(),
                                  nullptr, nullptr),
              0);
  }
}

// Rows without a top-k or top-p cut walk the ids in order (WalksIdOrder): IdOrderRows, and
// SampleRows for such rows beside sorted ones, pick SampleToken's token; rows with few allowed
// ids (a mask keeping one in 32) never draw a masked one, and hot rows (T 0.2) draw from a
// handful of ids spread over the runs.
TEST(SampleGreedyGpuTest, IdOrderRowsPickWhatTheCpuPicks) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const uint32_t seed = std::random_device{}();  // printed with any failure
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const float temperatures[] = {1.0f, 0.2f, 1.7f, 0.0f, 1.0f, 0.6f};
  const float min_ps[] = {0.0f, 0.0f, 0.05f, 0.0f, 0.3f, 0.0f};
  for (int32_t vocab : {1000, 129280, 262144}) {
    const int64_t rows = 24;
    testing::SamplerStep s =
        testing::RandomStep(rows, vocab, rng, [](int64_t r) { return (r / 6) % 2 == 1; });
    for (int64_t r = 0; r < rows; ++r) {
      if (r % 12 == 11) {  // one id in 32 allowed (and id 0)
        for (int64_t w = 0; w < s.words(); ++w) s.mask[r * s.words() + w] &= 0x00010000u;
        s.mask[r * s.words()] |= 1u;
      }
      // top_k = vocab: no cut.
      s.params[r] = testing::DrawParams(
          {temperatures[r % 6], 1.0f, min_ps[r % 6], r % 5 == 4 ? static_cast<int>(vocab) : -1},
          rng, r, r % 3 != 0);
      ASSERT_TRUE(
          IsGreedy(s.params[r].temperature, s.params[r].top_k) ||
          WalksIdOrder(s.params[r].temperature, s.params[r].top_k, s.params[r].top_p, vocab));
      // A broken model's rows: a positive NaN, a negative NaN and +inf at id 0 (never masked);
      // NaN sums on both sides draw the last id (log-probabilities are NaN: not asked).
      if (r >= 18 && r <= 20) {
        s.row(r)[0] = r == 18 ? std::nanf("") : r == 19 ? -std::nanf("") : INFINITY;
        s.params[r].logprob = 0;
      }
    }
    kernels::SamplerWorkspace ws;
    ASSERT_EQ(ws.Reserve(rows, vocab), 0);
    DeviceVector<float> dl(s.logits);
    const testing::Drawn walked = testing::DrawOnDevice(kernels::IdOrderRows, ws, dl.get(), s);
    const std::vector<int32_t>& got = walked.ids;
    testing::ExpectCpuPicks(s, got, walked.logprobs);
    for (int64_t r = 11; r < rows; r += 12) {
      EXPECT_TRUE((s.mask[r * s.words() + got[r] / 32] >> (got[r] % 32)) & 1u) << r;
    }
    // SampleRows: the same rows, every other one turned into a nucleus draw the sort takes.
    testing::SamplerStep half = s;
    for (int64_t r = 1; r < rows; r += 2) half.params[r].top_p = 0.9f;
    const testing::Drawn mixed = testing::DrawOnDevice(kernels::SampleRows, ws, dl.get(), half);
    testing::ExpectCpuPicks(half, mixed.ids, mixed.logprobs);
    testing::ExpectReversedPicks(kernels::IdOrderRows, ws, dl.get(), s, got);
  }
}

}  // namespace
}  // namespace deepinfer
