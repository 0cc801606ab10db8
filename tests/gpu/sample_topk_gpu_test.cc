// TopKRows (kernels/sample_topk.cu's select, then the sampler's pick) against the sort-based
// SampleRows and the CPU sampler: the same token for every row keeping at most kTopKMax
// candidates, with grammar masks, ties on a coarse grid and more equal maxima than kTopKMax,
// vocabularies of one tile, one merge and two merges, rows read through an index; the
// log-probabilities where asked.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "engine/sampling/sampler.h"
#include "kernels/cuda_available.h"
#include "kernels/sample_topk.h"
#include "kernels/sampling.h"
#include "tests/gpu/gpu_test_util.h"

namespace deepinfer {
namespace {

using testing::DeviceVector;

TEST(SampleTopKGpuTest, PicksWhatTheSortAndTheCpuPick) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const uint32_t seed = std::random_device{}();  // printed with any failure
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  struct Case {
    float temperature, top_p, min_p;
    int top_k;
  };
  const std::vector<Case> cases = {{0.7f, 1.0f, 0.0f, 50},  {1.0f, 0.9f, 0.0f, 128},
                                   {1.2f, 1.0f, 0.1f, 5},   {0.0f, 1.0f, 0.0f, 20},
                                   {0.9f, 0.8f, 0.05f, 64}, {1.0f, 1.0f, 0.0f, 1},
                                   {0.0f, 1.0f, 0.0f, -1},  {0.0f, 1.0f, 0.0f, 20}};
  // 1,000 ids: one tile; 4,196: a last tile of 100 ids; 129,280: 32 tiles, one merge; 262,144:
  // 64 tiles, two merges. Greedy rows (top_k -1 or 20) take the select path with the others.
  for (int32_t vocab : {1000, 4196, 129280, 262144}) {
    const int64_t rows = 2 * static_cast<int64_t>(cases.size()), words = (vocab + 31) / 32;
    kernels::SamplerWorkspace ws;
    ASSERT_EQ(ws.Reserve(rows, vocab), 0);
    std::vector<float> logits(rows * vocab);
    std::vector<uint32_t> mask(rows * words, ~0u);
    std::vector<kernels::SampleParams> params(rows);
    for (int64_t r = 0; r < rows; ++r) {
      float* row = &logits[r * vocab];
      const bool coarse = r % 2 == 1;  // a grid of 0.5: many exact ties inside the top k
      for (int32_t i = 0; i < vocab; ++i) {
        const float v = normal(rng);
        row[i] = coarse ? std::round(v * 2.0f) / 2.0f : v;
      }
      if (r == 4) {  // 300 equal maxima spread over the tiles: the lowest ids win
        for (int j = 0; j < 300; ++j) row[(static_cast<int64_t>(j) * 7919) % vocab] = 20.0f;
      }
      if (r == 7) {  // greedy, top_k 20: the max is zero twice, -0 ties +0, the lower id wins
        for (int32_t i = 0; i < vocab; ++i) row[i] = -std::fabs(row[i]) - 1.0f;
        row[7] = -0.0f;
        row[9] = 0.0f;
      }
      if (r % 3 == 2) {  // a grammar mask allowing about half of the tokens
        for (int64_t w = 0; w < words; ++w) mask[r * words + w] = static_cast<uint32_t>(rng());
        mask[r * words] |= 1u;
      }
      const Case& c = cases[r % cases.size()];
      params[r] = {c.temperature,
                   c.top_p,
                   c.min_p,
                   c.top_k,
                   rng(),
                   static_cast<uint64_t>(r),
                   static_cast<uint64_t>(rng() % 1000),
                   static_cast<uint32_t>(r % 2 == 0)};
    }
    DeviceVector<float> dl(logits);
    DeviceVector<uint32_t> dm(mask);
    DeviceVector<kernels::SampleParams> dp(params);
    auto selected = DeviceVector<int32_t>::Poisoned(rows);
    auto sorted = DeviceVector<int32_t>::Poisoned(rows);
    DeviceVector<float> dlp(std::vector<float>(rows, 1.0f));  // a log-probability is never 1
    ASSERT_EQ(kernels::TopKRows(ws, dl.get(), rows, vocab, dm.get(), dp.get(), nullptr,
                                selected.get(), dlp.get(), nullptr),
              0);
    ASSERT_EQ(kernels::SampleRows(ws, dl.get(), rows, vocab, dm.get(), dp.get(), nullptr,
                                  sorted.get(), nullptr, nullptr),
              0);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<int32_t> got = selected.ToHost(), want_sorted = sorted.ToHost();
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
    // Row 4 (top_k 64 among 300 tied maxima): one of the tied maxima.
    EXPECT_EQ(logits[4 * vocab + got[4]], 20.0f);
    EXPECT_EQ(got[7], 7);
    // Through rows_of: draw r reads row rows - 1 - r, with that row's params and mask.
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
    ASSERT_EQ(kernels::TopKRows(ws, dl.get(), rows, vocab, dmrev.get(), dprev.get(), drev.get(),
                                got_rev.get(), nullptr, nullptr),
              0);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<int32_t> rev = got_rev.ToHost();
    for (int64_t r = 0; r < rows; ++r) EXPECT_EQ(rev[r], got[rows - 1 - r]) << r;
  }
  // Fewer ids than kTopKMax: refused (the device forward takes the sort then).
  kernels::SamplerWorkspace small;
  ASSERT_EQ(small.Reserve(1, kernels::kTopKMax - 1), 0);
  EXPECT_NE(kernels::TopKRows(small, nullptr, 1, kernels::kTopKMax - 1, nullptr, nullptr, nullptr,
                              nullptr, nullptr, nullptr),
            0);
}

}  // namespace
}  // namespace deepinfer
