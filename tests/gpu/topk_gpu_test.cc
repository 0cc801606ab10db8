// The device top-k (kernels/topk.h) against the CPU's TopKIndices: the same indices in the same
// order on fresh random rows, with heavy ties, -0 next to +0, rows shorter than k, per-row
// visible counts, and the indexer's sizes (top-512 of up to 32K compressed rows).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "engine/model/routing.h"
#include "kernels/cuda_available.h"
#include "kernels/topk.h"
#include "tests/gpu/gpu_test_util.h"

namespace deepinfer {
namespace {

using testing::DeviceVector;

class TopKGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  }
  std::mt19937 rng_{std::random_device{}()};

  // Rows of n scores; row r sees counts[r] of them when counted.
  void Check(int64_t rows, int64_t n, int k, bool counted) {
    const int64_t stride = n + 3;  // rows not packed
    std::vector<float> scores(rows * stride, 0.0f);
    std::vector<int32_t> counts(rows);
    std::normal_distribution<float> normal(0.0f, 2.0f);
    for (int64_t r = 0; r < rows; ++r) {
      const int kind = static_cast<int>(r % 4);
      for (int64_t i = 0; i < n; ++i) {
        float v = normal(rng_);
        if (kind == 1) v = std::round(v * 2.0f) / 2.0f;                     // a coarse grid: ties
        if (kind == 2) v = static_cast<float>(rng_() % 3) - 1.0f;           // three values only
        if (kind == 3 && rng_() % 4 == 0) v = (rng_() % 2) ? 0.0f : -0.0f;  // signed zeros
        scores[r * stride + i] = v;
      }
      counts[r] = counted ? static_cast<int32_t>(rng_() % (n + 1)) : static_cast<int32_t>(n);
    }
    if (counted && rows > 1) counts[1] = 0;
    DeviceVector<float> d_scores(scores);
    DeviceVector<int32_t> d_counts(counts);
    auto d_idx = DeviceVector<int32_t>::Poisoned(rows * k);
    auto workspace = DeviceVector<uint8_t>::Poisoned(kernels::RowTopKWorkspace(rows, n, k));
    ASSERT_EQ(kernels::RowTopK(d_scores.get(), rows, stride, counted ? d_counts.get() : nullptr, n,
                               k, d_idx.get(), workspace.get(), nullptr),
              0);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<int32_t> got = d_idx.ToHost();
    std::vector<int32_t> want(k), scratch;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t visible = counts[r];
      const int64_t kk = std::min<int64_t>(k, visible);
      std::fill(want.begin(), want.end(), -1);
      TopKIndices(&scores[r * stride], visible, k, want.data(), scratch);
      for (int j = 0; j < k; ++j) {
        ASSERT_EQ(got[r * k + j], j < kk ? want[j] : -1)
            << "row " << r << " slot " << j << " of n " << visible << " k " << k;
      }
    }
  }
};

TEST_F(TopKGpuTest, PicksWhatTheCpuPicks) {
  Check(8, 32768, 512, false);  // the indexer at 128K context (ratio 4): rows split in chunks
  Check(2, 20000, 512, true);   // split rows with visible counts, some below k
  Check(130, 9000, 512, true);  // enough rows for a block each
  Check(12, 5000, 512, true);
  Check(5, 513, 512, false);    // one score left out
  Check(4, 300, 512, false);    // fewer scores than k: all of them, sorted
  Check(9, 256, 6, false);      // router-sized
  Check(3, 70000, 2048, true);  // the largest k
  Check(2, 1, 1, false);
}

TEST_F(TopKGpuTest, RejectsBadArguments) {
  EXPECT_NE(kernels::RowTopK(nullptr, 1, 1, nullptr, 1, 0, nullptr, nullptr, nullptr), 0);
  EXPECT_NE(
      kernels::RowTopK(nullptr, 1, 1, nullptr, 1, kernels::kMaxTopK + 1, nullptr, nullptr, nullptr),
      0);
  ASSERT_GT(kernels::RowTopKWorkspace(1, 32768, 512), 0u);  // split rows need their workspace
  EXPECT_NE(kernels::RowTopK(nullptr, 1, 32768, nullptr, 32768, 512, nullptr, nullptr, nullptr), 0);
}

}  // namespace
}  // namespace deepinfer
