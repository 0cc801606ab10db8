// GPU sampling against the CPU sampler (engine/sampling/sampler.h): the same token for every row
// on fresh random logits, with grammar bitmasks, heavy ties (logits on a coarse grid), small and
// full vocabularies, and each kind of truncation (min-p and top-p together too); and rows read
// through an index (rows_of); the picked tokens' log-probabilities where asked.
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
    kernels::SamplerWorkspace ws;
    ASSERT_EQ(ws.Reserve(rows, vocab), 0);
    const int64_t words = (vocab + 31) / 32;
    std::vector<float> logits(rows * vocab);
    std::vector<uint32_t> mask(rows * words, ~0u);
    std::vector<kernels::SampleParams> params(rows);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    for (int64_t r = 0; r < rows; ++r) {
      const bool coarse = r % 2 == 1;  // logits on a grid of 0.5: many exact ties
      for (int32_t i = 0; i < vocab; ++i) {
        const float v = normal(rng);
        logits[r * vocab + i] = coarse ? std::round(v * 2.0f) / 2.0f : v;
      }
      if ((r / 2) % 2 == 1) {  // a grammar mask allowing about half of the tokens
        for (int64_t w = 0; w < words; ++w) mask[r * words + w] = static_cast<uint32_t>(rng());
        mask[r * words] |= 1u;  // at least one allowed token
      }
      const Case& c = cases[(r / 4) % cases.size()];
      params[r] = {c.temperature,
                   c.top_p,
                   c.min_p,
                   c.top_k,
                   rng(),
                   static_cast<uint64_t>(r),
                   static_cast<uint64_t>(rng() % 1000),
                   static_cast<uint32_t>(r % 3 != 0)};  // two rows in three: log-probabilities
    }
    DeviceVector<float> dl(logits);
    DeviceVector<uint32_t> dm(mask);
    DeviceVector<kernels::SampleParams> dp(params);
    auto dout = DeviceVector<int32_t>::Poisoned(rows);
    DeviceVector<float> dlp(std::vector<float>(rows, 1.0f));  // a log-probability is never 1
    ASSERT_EQ(kernels::SampleRows(ws, dl.get(), rows, vocab, dm.get(), dp.get(), nullptr,
                                  dout.get(), dlp.get(), nullptr),
              0);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<int32_t> got = dout.ToHost();
    const std::vector<float> got_lp = dlp.ToHost();
    // Rows read through rows_of (the device forward's draws among a step's rows): draw r reads
    // logits row rows - 1 - r with that row's params and mask, so it picks what that row did.
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
    auto dout_rev = DeviceVector<int32_t>::Poisoned(rows);
    ASSERT_EQ(kernels::SampleRows(ws, dl.get(), rows, vocab, dmrev.get(), dprev.get(), drev.get(),
                                  dout_rev.get(), nullptr, nullptr),
              0);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<int32_t> got_rev = dout_rev.ToHost();
    for (int64_t r = 0; r < rows; ++r) EXPECT_EQ(got_rev[r], got[rows - 1 - r]) << r;
    if (vocab == 1000) {  // past kSumChunk * kMaxSumRuns ids a block cannot hold a row's runs
      kernels::SamplerWorkspace too_wide;
      EXPECT_NE(too_wide.Reserve(1, kSumChunk * kMaxSumRuns + 1), 0);
    }
    std::vector<int32_t> scratch;
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> row(logits.begin() + r * vocab, logits.begin() + (r + 1) * vocab);
      for (int32_t i = 0; i < vocab; ++i) {
        if (!((mask[r * words + i / 32] >> (i % 32)) & 1u)) row[i] = -INFINITY;
      }
      const kernels::SampleParams& p = params[r];
      const int32_t want = SampleToken(row.data(), vocab, p, scratch);
      EXPECT_EQ(got[r], want) << "vocab " << vocab << " row " << r << " T " << p.temperature
                              << " top_k " << p.top_k << " top_p " << p.top_p;
      if (p.logprob) {  // the host's value, its sum of exponentials in another order
        TokenLogprobs lp;
        ComputeLogprobs(row.data(), vocab, got[r], 0, &lp);
        EXPECT_NEAR(got_lp[r], lp.chosen, 1e-5 * std::max(1.0f, std::fabs(lp.chosen))) << r;
      } else {
        EXPECT_EQ(got_lp[r], 0.0f) << r;  // not asked
      }
    }
  }
}

}  // namespace
}  // namespace deepinfer
