// What the GPU sampler tests share (tests/gpu/sampling_gpu_test.cc, sample_greedy_gpu_test.cc,
// sample_topk_gpu_test.cc): a step of random rows, the CPU sampler's picks and log-probabilities
// that the GPU's must equal, and the same step read back to front through rows_of.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "engine/sampling/sampler.h"
#include "kernels/sampling.h"
#include "tests/gpu/gpu_test_util.h"

namespace deepinfer::testing {

/// A step's draws on the host: rows of vocab logits, their grammar masks (all ones for rows
/// without one) and their params.
struct SamplerStep {
  int64_t rows = 0;
  int32_t vocab = 0;
  std::vector<float> logits;
  std::vector<uint32_t> mask;  // [rows, words()]
  std::vector<kernels::SampleParams> params;

  int64_t words() const { return (vocab + 31) / 32; }
  float* row(int64_t r) { return &logits[r * vocab]; }
};

/// Normal(0, 3) logits, on a grid of 0.5 in odd rows (many exact ties); rows for which
/// masked(r) holds get a mask allowing about half of the tokens (id 0 always). Params are left
/// to the caller.
template <typename Masked>
SamplerStep RandomStep(int64_t rows, int32_t vocab, std::mt19937& rng, Masked masked) {
  SamplerStep s;
  s.rows = rows;
  s.vocab = vocab;
  s.logits.resize(rows * vocab);
  s.mask.assign(rows * s.words(), ~0u);
  s.params.resize(rows);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int64_t r = 0; r < rows; ++r) {
    for (int32_t i = 0; i < vocab; ++i) {
      const float v = normal(rng);
      s.logits[r * vocab + i] = r % 2 == 1 ? std::round(v * 2.0f) / 2.0f : v;
    }
    if (!masked(r)) continue;
    for (int64_t w = 0; w < s.words(); ++w) s.mask[r * s.words() + w] = rng();
    s.mask[r * s.words()] |= 1u;
  }
  return s;
}

/// A draw's sampling settings, as the tests list their cases.
struct SamplerCase {
  float temperature, top_p, min_p;
  int top_k;
};

/// Draw r's params: the case's settings, a fresh seed, stream r, a position below 1,000, and the
/// log-probability when `logprob`.
inline kernels::SampleParams DrawParams(const SamplerCase& c, std::mt19937& rng, int64_t r,
                                        bool logprob) {
  const uint32_t seed = rng();
  const auto position = static_cast<uint64_t>(rng() % 1000);
  return {c.temperature, c.top_p,          c.min_p, c.top_k, seed, static_cast<uint64_t>(r),
          position,      logprob ? 1u : 0u};
}

/// Row r's logits with its masked tokens at -inf: what the CPU sampler draws from.
inline std::vector<float> CpuRow(const SamplerStep& s, int64_t r) {
  std::vector<float> row(s.logits.begin() + r * s.vocab, s.logits.begin() + (r + 1) * s.vocab);
  for (int32_t i = 0; i < s.vocab; ++i) {
    if (!((s.mask[r * s.words() + i / 32] >> (i % 32)) & 1u)) row[i] = -INFINITY;
  }
  return row;
}

/// Each row's token is SampleToken's; its log-probability, where its params ask, is
/// ComputeLogprobs' within float rounding, and 0 where they do not.
inline void ExpectCpuPicks(const SamplerStep& s, const std::vector<int32_t>& got,
                           const std::vector<float>& got_lp) {
  std::vector<int32_t> scratch;
  for (int64_t r = 0; r < s.rows; ++r) {
    const std::vector<float> row = CpuRow(s, r);
    const kernels::SampleParams& p = s.params[r];
    EXPECT_EQ(got[r], SampleToken(row.data(), s.vocab, p, scratch))
        << "vocab " << s.vocab << " row " << r << " T " << p.temperature << " top_k " << p.top_k
        << " top_p " << p.top_p << " min_p " << p.min_p;
    if (p.logprob) {
      TokenLogprobs lp;
      ComputeLogprobs(row.data(), s.vocab, got[r], 0, &lp);
      EXPECT_NEAR(got_lp[r], lp.chosen, 1e-5 * std::max(1.0f, std::fabs(lp.chosen))) << r;
    } else {
      EXPECT_EQ(got_lp[r], 0.0f) << r;
    }
  }
}

/// What a step's draws wrote: each row's id and log-probability.
struct Drawn {
  std::vector<int32_t> ids;
  std::vector<float> logprobs;
};

/// `sample` (SampleRows' signature) on step s: its masks and params uploaded beside d_logits
/// (its logits, which the caller uploads once), ids poisoned and log-probabilities at 1 (never
/// a log-probability) before the call; what it wrote, read back after it finished.
template <typename Sample>
Drawn DrawOnDevice(Sample sample, kernels::SamplerWorkspace& ws, const float* d_logits,
                   const SamplerStep& s) {
  DeviceVector<uint32_t> d_mask(s.mask);
  DeviceVector<kernels::SampleParams> d_params(s.params);
  auto ids = DeviceVector<int32_t>::Poisoned(s.rows);
  DeviceVector<float> logprobs(std::vector<float>(s.rows, 1.0f));
  EXPECT_EQ(sample(ws, d_logits, s.rows, s.vocab, d_mask.get(), d_params.get(), nullptr, ids.get(),
                   logprobs.get(), nullptr),
            0);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return {ids.ToHost(), logprobs.ToHost()};
}

/// `sample` (SampleRows' signature) on the step read back to front through rows_of: draw r reads
/// logits row rows - 1 - r with that row's params and mask, so it must pick want[rows - 1 - r].
template <typename Sample>
void ExpectReversedPicks(Sample sample, kernels::SamplerWorkspace& ws, const float* d_logits,
                         const SamplerStep& s, const std::vector<int32_t>& want) {
  const int64_t rows = s.rows, words = s.words();
  std::vector<int32_t> reversed(rows);
  std::vector<uint32_t> mask(s.mask.size());
  std::vector<kernels::SampleParams> params(rows);
  for (int64_t r = 0; r < rows; ++r) {
    reversed[r] = static_cast<int32_t>(rows - 1 - r);
    params[r] = s.params[rows - 1 - r];
    std::copy_n(&s.mask[(rows - 1 - r) * words], words, &mask[r * words]);
  }
  DeviceVector<int32_t> d_rows(reversed);
  DeviceVector<uint32_t> d_mask(mask);
  DeviceVector<kernels::SampleParams> d_params(params);
  auto out = DeviceVector<int32_t>::Poisoned(rows);
  ASSERT_EQ(sample(ws, d_logits, rows, s.vocab, d_mask.get(), d_params.get(), d_rows.get(),
                   out.get(), nullptr, nullptr),
            0);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<int32_t> got = out.ToHost();
  for (int64_t r = 0; r < rows; ++r) EXPECT_EQ(got[r], want[rows - 1 - r]) << r;
}

}  // namespace deepinfer::testing
