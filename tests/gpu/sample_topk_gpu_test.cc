// TopKRows (kernels/sample_topk.cu's select, then the sampler's pick) against the sort-based
// SampleRows and the CPU sampler: the same token for every row keeping at most kTopKMax
// candidates, or greedy, with grammar masks, ties on a coarse grid and more equal maxima than
// kTopKMax, vocabularies of one tile, a short last tile, one merge and two merges, rows read
// through an index; the log-probabilities where asked. And the select's candidate lists against
// a full sort on the host.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
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
  const std::vector<testing::SamplerCase> cases = {{0.7f, 1.0f, 0.0f, 50},  {1.0f, 0.9f, 0.0f, 128},
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
      s.params[r] = testing::DrawParams(cases[r % cases.size()], rng, r, r % 2 == 0);
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

// SelectTopKCandidates' lists themselves: each row's first kTopKMax candidates, logits and ids,
// are the full sort's (descending masked logit, -0 as +0, ties by lower id), on vocabularies of
// fewer ids than the list holds (the pads past them written nowhere), exactly kTopKMax, one tile, a
// short last tile, one merge and two, with more tied maxima than the list holds, tied runs across
// the list's end and masks; rows read through rows_of.
TEST(SampleTopKGpuTest, SelectsTheSortsFirstCandidates) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  constexpr int64_t kRows = 5;
  for (int32_t vocab : {100, kernels::kTopKMax, 1000, 4196, 129280, 262144}) {
    SCOPED_TRACE("vocab " + std::to_string(vocab));
    // Draw 1's mask goes with logits row 3 (rows_of below): a mask read by the logits' row
    // instead of the draw's would show.
    testing::SamplerStep s =
        testing::RandomStep(kRows, vocab, rng, [](int64_t r) { return r == 1; });
    for (int j = 0; j < 300; ++j) s.row(3)[(static_cast<int64_t>(j) * 7919) % vocab] = 20.0f;
    for (int32_t i = 0; i < vocab; ++i) s.row(4)[i] = std::round(s.row(4)[i] / 4.0f);  // few values
    s.row(4)[vocab / 2] = -0.0f;
    const int64_t tiles = (vocab + 4095) / 4096;
    DeviceVector<float> dl(s.logits);
    DeviceVector<uint32_t> mask(s.mask);
    // Draw r reads logits row kRows - 1 - r with mask row r.
    std::vector<int32_t> reversed(kRows);
    std::iota(reversed.rbegin(), reversed.rend(), 0);
    DeviceVector<int32_t> rows_of(reversed);
    auto scratch_a = DeviceVector<uint64_t>::Poisoned(kRows * tiles * kernels::kTopKMax);
    auto scratch_b = DeviceVector<uint64_t>::Poisoned(kRows * tiles * kernels::kTopKMax);
    auto keys = DeviceVector<float>::Poisoned(kRows * vocab);
    auto ids = DeviceVector<int32_t>::Poisoned(kRows * vocab);
    ASSERT_EQ(kernels::SelectTopKCandidates(dl.get(), kRows, vocab, mask.get(), rows_of.get(),
                                            scratch_a.get(), scratch_b.get(), keys.get(), ids.get(),
                                            nullptr),
              0);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> got_keys = keys.ToHost();
    const std::vector<int32_t> got_ids = ids.ToHost();
    for (int64_t r = 0; r < kRows; ++r) {
      std::vector<float> row(s.row(reversed[r]), s.row(reversed[r]) + vocab);
      for (int32_t i = 0; i < vocab; ++i) {
        if (!((s.mask[r * s.words() + i / 32] >> (i % 32)) & 1u)) row[i] = -INFINITY;
      }
      std::vector<int32_t> order(vocab);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
        return DescendingKey(row[a]) < DescendingKey(row[b]);
      });
      for (int i = 0; i < std::min(kernels::kTopKMax, vocab); ++i) {
        ASSERT_EQ(got_ids[r * vocab + i], order[i]) << "row " << r << " rank " << i;
        const float want = KeyLogit(DescendingKey(row[order[i]]));
        ASSERT_EQ(std::signbit(got_keys[r * vocab + i]), std::signbit(want)) << r << " " << i;
        ASSERT_EQ(got_keys[r * vocab + i], want) << "row " << r << " rank " << i;
      }
    }
  }
}

}  // namespace
}  // namespace deepinfer
