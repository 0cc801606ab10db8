// GPU sampling against the CPU sampler (engine/sampling/sampler.h): the same token for every row
// on fresh random logits, with grammar bitmasks, heavy ties (logits on a coarse grid), small and
// full vocabularies, and each kind of truncation (min-p and top-p together too); and rows read
// through an index (rows_of); the picked tokens' log-probabilities where asked.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

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

struct Case {
  float temperature, top_p, min_p;
  int top_k;
};

TEST(SamplingGpuTest, PicksWhatTheCpuSamplerPicks) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const uint32_t seed = std::random_device{}();  // printed with any failure
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const std::vector<Case> cases = {{0.0f, 1.0f, 0.0f, -1},    {0.7f, 1.0f, 0.0f, 50},
                                   {1.0f, 0.9f, 0.0f, -1},    {1.3f, 1.0f, 0.05f, -1},
                                   {0.8f, 0.95f, 0.0f, 2000}, {1.0f, 1.0f, 0.0f, 1},
                                   {0.9f, 0.8f, 0.1f, -1},    {1.1f, 1.0f, 0.0f, 1024},
                                   {1.0f, 1.0f, 0.0f, -1}};  // untruncated: the draw over every run
  // 262,144 ids: 512 runs of 512, a warp a run (RunSumsKernel), in 64 blocks of 8 warps a row.
  for (int32_t vocab : {1000, 129280, 262144}) {
    const int64_t rows = 2 * static_cast<int64_t>(cases.size()) * 2;
    // Each case four times: plain and on the coarse grid, each with and without a mask.
    testing::SamplerStep s =
        testing::RandomStep(rows, vocab, rng, [](int64_t r) { return (r / 2) % 2 == 1; });
    for (int64_t r = 0; r < rows; ++r) {
      const Case& c = cases[(r / 4) % cases.size()];
      s.params[r] = {c.temperature,
                     c.top_p,
                     c.min_p,
                     c.top_k,
                     rng(),
                     static_cast<uint64_t>(r),
                     static_cast<uint64_t>(rng() % 1000),
                     static_cast<uint32_t>(r % 3 != 0)};  // two rows in three: log-probabilities
    }
    kernels::SamplerWorkspace ws;
    ASSERT_EQ(ws.Reserve(rows, vocab), 0);
    DeviceVector<float> dl(s.logits);
    const testing::Drawn drawn = testing::DrawOnDevice(kernels::SampleRows, ws, dl.get(), s);
    const std::vector<int32_t>& got = drawn.ids;
    testing::ExpectCpuPicks(s, got, drawn.logprobs);
    // Rows read through rows_of (the device forward's draws among a step's rows).
    testing::ExpectReversedPicks(kernels::SampleRows, ws, dl.get(), s, got);
    if (vocab == 1000) {  // past kSumChunk * kMaxSumRuns ids a block cannot hold a row's runs
      kernels::SamplerWorkspace too_wide;
      EXPECT_NE(too_wide.Reserve(1, kSumChunk * kMaxSumRuns + 1), 0);
    }
  }
}

}  // namespace
}  // namespace deepinfer
