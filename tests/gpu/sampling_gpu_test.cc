// GPU sampling against the CPU sampler (engine/sampling/sampler.h): the same token for every row
// on fresh random logits, with grammar bitmasks, heavy ties (logits on a coarse grid), small and
// full vocabularies, and each kind of truncation (min-p and top-p together too); and rows read
// through an index (rows_of); the picked tokens' log-probabilities where asked; and the running
// sums both walks search, ChunkedPrefix's to the last bit.
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

using testing::SamplerCase;

TEST(SamplingGpuTest, PicksWhatTheCpuSamplerPicks) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const uint32_t seed = std::random_device{}();  // printed with any failure
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const std::vector<SamplerCase> cases = {
      {0.0f, 1.0f, 0.0f, -1},    {0.7f, 1.0f, 0.0f, 50},
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
      // Two rows in three: log-probabilities.
      s.params[r] = testing::DrawParams(cases[(r / 4) % cases.size()], rng, r, r % 3 != 0);
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

// SortedRows, for steps without a draw that walks, draws what SampleRows draws: the same ids and
// log-probabilities (and the CPU's), without the walk's launches; rows read through rows_of too.
TEST(SamplingGpuTest, SortedRowsDrawWhatSampleRowsDraws) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const std::vector<SamplerCase> cases = {{0.0f, 1.0f, 0.0f, -1},    {0.7f, 1.0f, 0.0f, 50},
                                          {1.0f, 0.9f, 0.0f, -1},    {0.9f, 0.8f, 0.1f, -1},
                                          {0.8f, 0.95f, 0.0f, 2000}, {1.1f, 1.0f, 0.0f, 512}};
  // Every case cuts at both vocabularies (a top-k of at least the vocabulary alone would walk).
  for (int32_t vocab : {1000, 129280}) {
    const int64_t rows = 2 * static_cast<int64_t>(cases.size());
    testing::SamplerStep s =
        testing::RandomStep(rows, vocab, rng, [](int64_t r) { return r % 3 == 1; });
    for (int64_t r = 0; r < rows; ++r) {
      const SamplerCase& c = cases[r % cases.size()];
      s.params[r] = testing::DrawParams(c, rng, r, r % 2 == 1);
      ASSERT_FALSE(WalksIdOrder(c.temperature, c.top_k, c.top_p, vocab) &&
                   !IsGreedy(c.temperature, c.top_k));
    }
    kernels::SamplerWorkspace ws;
    ASSERT_EQ(ws.Reserve(rows, vocab), 0);
    DeviceVector<float> dl(s.logits);
    const testing::Drawn sorted = testing::DrawOnDevice(kernels::SortedRows, ws, dl.get(), s);
    const testing::Drawn all = testing::DrawOnDevice(kernels::SampleRows, ws, dl.get(), s);
    EXPECT_EQ(sorted.ids, all.ids) << "vocab " << vocab;
    EXPECT_EQ(sorted.logprobs, all.logprobs) << "vocab " << vocab;
    testing::ExpectCpuPicks(s, sorted.ids, sorted.logprobs);
    testing::ExpectReversedPicks(kernels::SortedRows, ws, dl.get(), s, sorted.ids);
  }
}

/// The running sums both samplers walk, as the GPU's kernels left them in memory: SampleRows'
/// sorted candidates' probabilities and ids, each candidate's sum within its run and each run's
/// sum.
struct RunningSums {
  std::vector<double> probs, within, run_sums;
  std::vector<int32_t> sorted_ids;
  int32_t vocab = 0;

  /// Row r's running sums as ChunkedPrefix forms them: each run's bases added in order from zero.
  std::vector<double> Prefix(int64_t r, int32_t n) const {
    std::vector<double> prefix(n);
    double base = 0;
    for (int32_t i = 0; i < n; ++i) {
      if (i > 0 && i % kSumChunk == 0) base += run_sums[r * kMaxSumRuns + i / kSumChunk - 1];
      prefix[i] = base + within[r * vocab + i];
    }
    return prefix;
  }
};

}  // namespace

namespace kernels {
struct SamplerWorkspaceProbe {
  static RunningSums Read(const SamplerWorkspace& ws, int64_t rows) {
    RunningSums s;
    s.vocab = ws.vocab_;
    const size_t cells = static_cast<size_t>(rows) * ws.vocab_;
    s.probs.resize(cells);
    s.within.resize(cells);
    s.sorted_ids.resize(cells);
    s.run_sums.resize(static_cast<size_t>(rows) * kMaxSumRuns);
    EXPECT_EQ(cudaMemcpy(s.probs.data(), ws.probs_, cells * sizeof(double), cudaMemcpyDeviceToHost),
              cudaSuccess);
    EXPECT_EQ(
        cudaMemcpy(s.within.data(), ws.prefix_, cells * sizeof(double), cudaMemcpyDeviceToHost),
        cudaSuccess);
    EXPECT_EQ(cudaMemcpy(s.sorted_ids.data(), ws.sorted_ids_, cells * sizeof(int32_t),
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    EXPECT_EQ(cudaMemcpy(s.run_sums.data(), ws.run_sums_, s.run_sums.size() * sizeof(double),
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    return s;
  }
};
}  // namespace kernels

namespace {

/// The first index where got != want (no NaN and no -0 arise in these sums), else -1.
int64_t FirstDifference(const std::vector<double>& got, const std::vector<double>& want) {
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i] != want[i]) return static_cast<int64_t>(i);
  }
  return -1;
}

// The GPU's running sums are ChunkedPrefix's to the last bit, on both walks: the sorted one's
// (SampleRows' top-p row: its own probabilities summed) and the id walk's (UnsortedPicks: the
// same row's probabilities put back in id order, min-p's zeros included). A sum in any other
// order (a tree, runs of another length) differs somewhere in 129K terms. What is checked is
// what the kernels leave in memory, each term's sum within its run and each run's sum; the
// bases the picks add them to (WarpRunBases, in shared memory) are rebuilt here as
// ChunkedPrefix adds them, and the picks' agreement with the CPU covers their use.
TEST(SamplingGpuTest, RunningSumsAreChunkedPrefixesToTheBit) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  for (int32_t vocab : {1000, 129280}) {
    SCOPED_TRACE("vocab " + std::to_string(vocab));
    // Pairs of draws (sorted, id walk) on one logits row each: plain, masked, and min-p.
    constexpr int64_t kRows = 6;
    testing::SamplerStep s =
        testing::RandomStep(kRows, vocab, rng, [](int64_t r) { return r / 2 == 1; });
    const std::vector<float> min_p = {0.0f, 0.0f, 0.02f};
    for (int64_t r = 0; r < kRows; ++r) {
      s.params[r] = {0.8f,
                     r % 2 == 0 ? 0.9f : 1.0f,
                     r % 2 == 0 ? 0.0f : min_p[r / 2],
                     -1,
                     rng(),
                     static_cast<uint64_t>(r),
                     7,
                     0};
      if (r % 2 == 1) std::copy_n(s.row(r - 1), vocab, s.row(r));  // a pair draws from one row
    }
    std::copy_n(&s.mask[2 * s.words()], s.words(), &s.mask[3 * s.words()]);
    kernels::SamplerWorkspace ws;
    ASSERT_EQ(ws.Reserve(kRows, vocab), 0);
    DeviceVector<float> dl(s.logits);
    const testing::Drawn drawn = testing::DrawOnDevice(kernels::SampleRows, ws, dl.get(), s);
    testing::ExpectCpuPicks(s, drawn.ids, drawn.logprobs);
    const RunningSums sorted = kernels::SamplerWorkspaceProbe::Read(ws, kRows);
    // SampleRows' sort reuses the walk's sums' buffer after its walk, so they are read after the
    // walk alone (which leaves the sorted rows' probabilities and ids where they were).
    auto walk = [](kernels::SamplerWorkspace& w, const float* logits, int64_t rows, int32_t n,
                   const uint32_t* mask, const kernels::SampleParams* params,
                   const int32_t* rows_of, int32_t* out, float* logprobs, void* stream) {
      return kernels::UnsortedPicks(w, logits, rows, n, mask, params, rows_of, false, out, logprobs,
                                    stream);
    };
    testing::DrawOnDevice(walk, ws, dl.get(), s);
    const RunningSums walked = kernels::SamplerWorkspaceProbe::Read(ws, kRows);
    for (int64_t r = 0; r < kRows; r += 2) {
      const std::vector<double> probs(sorted.probs.begin() + r * vocab,
                                      sorted.probs.begin() + (r + 1) * vocab);
      std::vector<double> want(vocab);
      ChunkedPrefix(probs.data(), vocab, want.data());
      EXPECT_EQ(FirstDifference(sorted.Prefix(r, vocab), want), -1) << "sorted row " << r;
      std::vector<double> by_id(vocab);
      for (int32_t i = 0; i < vocab; ++i) {
        const double p = probs[i];
        by_id[sorted.sorted_ids[r * vocab + i]] = p < s.params[r + 1].min_p ? 0.0 : p;
      }
      ChunkedPrefix(by_id.data(), vocab, want.data());
      EXPECT_EQ(FirstDifference(walked.Prefix(r + 1, vocab), want), -1) << "id-walk row " << r + 1;
    }
  }
}

}  // namespace
}  // namespace deepinfer
