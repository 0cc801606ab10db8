// GreedyRows (kernels/sample_greedy.cu) against the sort-based SampleRows and the CPU sampler:
// the same token for every greedy row, with grammar masks, ties on a coarse grid and across the
// row's slices, rows read through an index, small and V4-sized vocabularies; the picked tokens'
// log-probabilities where asked, 0 where not.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "engine/sampling/sampler.h"
#include "kernels/cuda_available.h"
#include "kernels/sampling.h"
#include "tests/gpu/gpu_test_util.h"

namespace deepinfer {
namespace {

using testing::DeviceVector;

TEST(SampleGreedyGpuTest, PicksWhatTheSortAndTheCpuPick) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const uint32_t seed = std::random_device{}();  // printed with any failure
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int32_t vocab : {1000, 129280, 262144}) {
    const int64_t rows = 12, words = (vocab + 31) / 32;
    kernels::SamplerWorkspace ws;
    ASSERT_EQ(ws.Reserve(rows, vocab), 0);
    std::vector<float> logits(rows * vocab);
    std::vector<uint32_t> mask(rows * words, ~0u);
    std::vector<kernels::SampleParams> params(rows);
    for (int64_t r = 0; r < rows; ++r) {
      float* row = &logits[r * vocab];
      const bool coarse = r % 2 == 1;  // a grid of 0.5: many exact ties, the max among them
      for (int32_t i = 0; i < vocab; ++i) {
        const float v = normal(rng);
        row[i] = coarse ? std::round(v * 2.0f) / 2.0f : v;
      }
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
      if ((r / 2) % 2 == 1) {
        for (int64_t w = 0; w < words; ++w) mask[r * words + w] = static_cast<uint32_t>(rng());
        mask[r * words] |= 1u;
      }
      // Greedy by temperature or by top-k 1; two rows in three ask for the log-probability.
      params[r] = {r % 4 == 3 ? 0.8f : 0.0f,
                   1.0f,
                   0.0f,
                   r % 4 == 3 ? 1 : -1,
                   rng(),
                   static_cast<uint64_t>(r),
                   0,
                   static_cast<uint32_t>(r % 3 != 0)};
    }
    DeviceVector<float> dl(logits);
    DeviceVector<uint32_t> dm(mask);
    DeviceVector<kernels::SampleParams> dp(params);
    auto greedy = DeviceVector<int32_t>::Poisoned(rows);
    auto sorted = DeviceVector<int32_t>::Poisoned(rows);
    DeviceVector<float> dlp(std::vector<float>(rows, 1.0f));  // a log-probability is never 1
    ASSERT_EQ(kernels::GreedyRows(ws, dl.get(), rows, vocab, dm.get(), dp.get(), nullptr,
                                  greedy.get(), dlp.get(), nullptr),
              0);
    ASSERT_EQ(kernels::SampleRows(ws, dl.get(), rows, vocab, dm.get(), dp.get(), nullptr,
                                  sorted.get(), nullptr, nullptr),
              0);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<int32_t> got = greedy.ToHost(), want_sorted = sorted.ToHost();
    const std::vector<float> got_lp = dlp.ToHost();
    std::vector<int32_t> scratch;
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> row(logits.begin() + r * vocab, logits.begin() + (r + 1) * vocab);
      for (int32_t i = 0; i < vocab; ++i) {
        if (!((mask[r * words + i / 32] >> (i % 32)) & 1u)) row[i] = -INFINITY;
      }
      EXPECT_EQ(got[r], want_sorted[r]) << "vocab " << vocab << " row " << r;
      EXPECT_EQ(got[r], SampleToken(row.data(), vocab, params[r], scratch)) << r;
      if (params[r].logprob) {
        TokenLogprobs lp;
        ComputeLogprobs(row.data(), vocab, got[r], 0, &lp);
        EXPECT_NEAR(got_lp[r], lp.chosen, 1e-5 * std::max(1.0f, std::fabs(lp.chosen))) << r;
      } else {
        EXPECT_EQ(got_lp[r], 0.0f) << r;
      }
    }
    EXPECT_EQ(got[0], 5);  // the lower of the two ids (rows 0, 4 and 8 have no mask)
    EXPECT_EQ(got[4], vocab - 1);
    EXPECT_EQ(got[8], 7);
    // Through rows_of (draws among a step's rows): draw r reads row rows - 1 - r.
    std::vector<int32_t> reversed(rows);
    std::vector<uint32_t> mask_rev(mask.size());
    std::vector<kernels::SampleParams> params_rev(rows);
    for (int64_t r = 0; r < rows; ++r) {
      reversed[r] = static_cast<int32_t>(rows - 1 - r);
      params_rev[r] = params[rows - 1 - r];
      std::copy_n(&mask[(rows - 1 - r) * words], words, &mask_rev[r * words]);
    }
    DeviceVector<int32_t> drev(reversed);
    DeviceVector<uint32_t> dmrev(mask_rev);
    DeviceVector<kernels::SampleParams> dprev(params_rev);
    auto got_rev = DeviceVector<int32_t>::Poisoned(rows);
    ASSERT_EQ(kernels::GreedyRows(ws, dl.get(), rows, vocab, dmrev.get(), dprev.get(), drev.get(),
                                  got_rev.get(), nullptr, nullptr),
              0);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<int32_t> rev = got_rev.ToHost();
    for (int64_t r = 0; r < rows; ++r) EXPECT_EQ(rev[r], got[rows - 1 - r]) << r;
    // More rows than the workspace holds, or another vocabulary: refused.
    EXPECT_NE(kernels::GreedyRows(ws, dl.get(), rows + 1, vocab, nullptr, dp.get(), nullptr,
                                  greedy.get(), nullptr, nullptr),
              0);
    EXPECT_NE(kernels::GreedyRows(ws, dl.get(), 1, vocab - 1, nullptr, dp.get(), nullptr,
                                  greedy.get(), nullptr, nullptr),
              0);
  }
}

}  // namespace
}  // namespace deepinfer
