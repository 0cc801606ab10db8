// TopKRows (kernels/sample_topk.cu's select, then the sampler's pick) against the sort-based
// SampleRows and the CPU sampler: the same token for every row keeping at most kTopKMax
// candidates, or greedy, with grammar masks, ties on a coarse grid and more equal maxima than
// kTopKMax, vocabularies of one tile, a short last tile, one merge and two merges, rows read
// through an index; the log-probabilities where asked.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda_available.h"
#include "kernels/sample_topk.h"
#include "kernels/sampling.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/sampler_test_util.h"

namespace deepinfer {
namespace {

using testing::DeviceVector;

TEST(SampleTopKGpuTest, PicksWhatTheSortAndTheCpuPick) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const uint32_t seed = std::random_device{}();  // printed with any failure
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
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
    const int64_t rows = 2 * static_cast<int64_t>(cases.size());
    testing::SamplerStep s = testing::RandomStep(rows, vocab, rng, [](int64_t r) {
      return r % 3 == 2;  // rows 4 and 7 stay unmasked for their checks below
    });
    for (int64_t r = 0; r < rows; ++r) {
      float* row = s.row(r);
      if (r == 4) {  // 300 equal maxima spread over the tiles: the lowest ids win
        for (int j = 0; j < 300; ++j) row[(static_cast<int64_t>(j) * 7919) % vocab] = 20.0f;
      }
      if (r == 7) {  // greedy, top_k 20: the max is zero twice, -0 ties +0, the lower id wins
        for (int32_t i = 0; i < vocab; ++i) row[i] = -std::fabs(row[i]) - 1.0f;
        row[7] = -0.0f;
        row[9] = 0.0f;
      }
      const Case& c = cases[r % cases.size()];
      s.params[r] = {c.temperature,
                     c.top_p,
                     c.min_p,
                     c.top_k,
                     rng(),
                     static_cast<uint64_t>(r),
                     static_cast<uint64_t>(rng() % 1000),
                     static_cast<uint32_t>(r % 2 == 0)};
    }
    kernels::SamplerWorkspace ws;
    ASSERT_EQ(ws.Reserve(rows, vocab), 0);
    DeviceVector<float> dl(s.logits);
    const testing::Drawn selected = testing::DrawOnDevice(kernels::TopKRows, ws, dl.get(), s);
    const std::vector<int32_t>& got = selected.ids;
    EXPECT_EQ(got, testing::DrawOnDevice(kernels::SampleRows, ws, dl.get(), s).ids)
        << "vocab " << vocab;
    testing::ExpectCpuPicks(s, got, selected.logprobs);
    EXPECT_EQ(s.logits[4 * vocab + got[4]], 20.0f);  // top_k 64 among 300 tied maxima
    EXPECT_EQ(got[7], 7);
    testing::ExpectReversedPicks(kernels::TopKRows, ws, dl.get(), s, got);
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
