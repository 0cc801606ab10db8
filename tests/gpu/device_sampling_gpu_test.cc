// The device forward's draws (SlotStepper::StepSample on engine/backend/cuda/device_forward.h):
// the picks on the device are the CPU sampler's (engine/sampling/sampler.h) on Step's logits of
// the same rows, under greedy, nucleus and top-k sampling, with a grammar mask, and for the rows
// a step asks for (a prompt chunk's last beside decode rows), with a log-probability where asked.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "engine/backend/cuda/device_forward.h"
#include "engine/sampling/sampler.h"
#include "kernels/cuda_available.h"
#include "tests/gpu/kernel_shaped_spec.h"
#include "tests/unit/test_util.h"

namespace deepinfer {
namespace {

// StepSample picks on the device what the CPU sampler picks from Step's logits: two forwards run
// the same steps (the same kernels, so the same logits), one returning logits, one tokens, under
// greedy, nucleus and top-k sampling, one row with a grammar mask; the picks feed the next step.
TEST(DeviceForwardTest, SamplesWhatTheCpuSamplerPicks) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  testing::TempDir dir;
  auto ck = testing::KernelShapedCheckpoint(dir, std::random_device{}());
  ASSERT_NE(ck, nullptr);
  const int32_t V = ck->config.vocab_size;
  const int64_t words = (V + 31) / 32;
  DeviceForwardOptions opt;
  opt.max_batch = 3;
  opt.slots = 3;
  opt.max_context = 128;
  auto with_logits = DeviceForward::Create(*ck, opt);
  auto with_tokens = DeviceForward::Create(*ck, opt);
  ASSERT_TRUE(with_logits.ok() && with_tokens.ok());
  std::mt19937 rng(std::random_device{}());
  const std::vector<int32_t> slots = {1, 2, 0};
  std::vector<int32_t> toks = {3, 5, 7}, next(3);
  std::vector<float> logits(3 * V);
  std::vector<uint32_t> mask(3 * words, ~0u);
  std::vector<int32_t> scratch;
  for (int step = 0; step < 24; ++step) {
    for (int64_t w = 0; w < words; ++w) mask[2 * words + w] = static_cast<uint32_t>(rng());
    mask[2 * words] |= 1u;
    std::vector<kernels::SampleParams> params(3);
    params[0].temperature = 0.0f;
    params[1].temperature = 0.8f;
    params[1].top_p = 0.9f;
    params[2].temperature = 1.3f;
    params[2].top_k = 20;
    for (int r = 0; r < 3; ++r) {
      params[r].seed = 1234 + r;
      params[r].stream = r;
      params[r].position = step;
    }
    ASSERT_TRUE((*with_logits)->Step(slots, toks, logits.data()).ok());
    ASSERT_TRUE((*with_tokens)->StepSample(slots, toks, params, mask.data(), next.data()).ok());
    for (int r = 0; r < 3; ++r) {
      std::vector<float> row(&logits[r * V], &logits[(r + 1) * V]);
      for (int32_t i = 0; i < V; ++i) {
        if (!((mask[r * words + i / 32] >> (i % 32)) & 1u)) row[i] = -INFINITY;
      }
      SamplingConfig cfg;
      cfg.temperature = params[r].temperature;
      cfg.top_p = params[r].top_p;
      cfg.top_k = params[r].top_k;
      cfg.seed = params[r].seed;
      EXPECT_EQ(next[r],
                SampleToken(row.data(), V, cfg, params[r].stream, params[r].position, scratch))
          << "step " << step << " row " << r;
    }
    toks = next;
  }
  EXPECT_EQ((*with_tokens)->length(0), 24);
}

// Asked for some rows (a prompt chunk's last beside a decode row), StepSample draws from exactly
// those rows' logits: the picks are the CPU sampler's on Step's logits of the same rows.
TEST(DeviceForwardTest, DrawsTheRowsAskedFor) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  testing::TempDir dir;
  auto ck = testing::KernelShapedCheckpoint(dir, std::random_device{}());
  ASSERT_NE(ck, nullptr);
  const int32_t V = ck->config.vocab_size;
  DeviceForwardOptions opt;
  opt.max_batch = 8;
  opt.max_chunk = 4;
  opt.slots = 2;
  opt.max_context = 128;
  auto with_logits = DeviceForward::Create(*ck, opt);
  auto with_tokens = DeviceForward::Create(*ck, opt);
  ASSERT_TRUE(with_logits.ok() && with_tokens.ok());
  std::vector<int32_t> slots = {0, 0, 0, 0, 1}, toks = {3, 5, 7, 9, 11}, rows = {3, 4};
  std::vector<int32_t> scratch;
  for (int step = 0; step < 6; ++step) {
    std::vector<kernels::SampleParams> params(2);
    for (int r = 0; r < 2; ++r) {
      params[r].temperature = 0.9f;
      params[r].top_k = 50;
      params[r].seed = 77;
      params[r].stream = r;
      params[r].position = step;
      params[r].logprob = r;  // row 1 with its log-probability
    }
    std::vector<float> logits(2 * V);
    std::vector<int32_t> next(2, -1);
    std::vector<float> logprobs(2, 1.0f);
    ASSERT_TRUE((*with_logits)->Step(slots, toks, rows, logits.data()).ok());
    ASSERT_TRUE((*with_tokens)
                    ->StepMixed(slots, toks, rows, params, nullptr, next.data(), logprobs.data(),
                                {}, nullptr)
                    .ok());
    for (int r = 0; r < 2; ++r) {
      SamplingConfig cfg;
      cfg.temperature = params[r].temperature;
      cfg.top_k = params[r].top_k;
      cfg.seed = params[r].seed;
      EXPECT_EQ(next[r],
                SampleToken(&logits[r * V], V, cfg, params[r].stream, params[r].position, scratch))
          << "step " << step << " row " << r;
    }
    TokenLogprobs want;
    ComputeLogprobs(&logits[V], V, next[1], 0, &want);
    EXPECT_NEAR(logprobs[1], want.chosen, 1e-5 * std::max(1.0f, std::fabs(want.chosen)));
    EXPECT_EQ(logprobs[0], 0.0f);  // not asked
    slots = {0, 1};
    toks = next;
    rows = {};
  }
  EXPECT_EQ((*with_tokens)->length(0), 9);
}

// A mixed step: logit rows 0 and 2 come back as Step returns them, draws 1 and 3 (the second
// under a mask, the first with its log-probability) pick what the CPU sampler picks from Step's
// rows 1 and 3 — each draw reading its own params, mask and row, not the row's place in the step.
TEST(DeviceForwardTest, MixedStepsReturnLogitsBesideDraws) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  testing::TempDir dir;
  auto ck = testing::KernelShapedCheckpoint(dir, std::random_device{}());
  ASSERT_NE(ck, nullptr);
  const int32_t V = ck->config.vocab_size;
  const int64_t words = (V + 31) / 32;
  DeviceForwardOptions opt;
  opt.max_batch = 4;
  opt.slots = 4;
  opt.max_context = 128;
  auto with_logits = DeviceForward::Create(*ck, opt);
  auto mixed = DeviceForward::Create(*ck, opt);
  ASSERT_TRUE(with_logits.ok() && mixed.ok());
  std::mt19937 rng(std::random_device{}());
  const std::vector<int32_t> slots = {0, 1, 2, 3}, draw_rows = {1, 3}, logit_rows = {0, 2};
  std::vector<int32_t> toks = {3, 5, 7, 9};
  std::vector<int32_t> scratch;
  for (int step = 0; step < 6; ++step) {
    std::vector<uint32_t> masks(2 * words, ~0u);
    for (int64_t w = 0; w < words; ++w) masks[words + w] = static_cast<uint32_t>(rng());
    masks[words] |= 1u;
    std::vector<kernels::SampleParams> params(2);
    params[0] = {0.8f, 0.9f, 0.0f, -1, 5, 1, static_cast<uint64_t>(step), 1};
    params[1] = {1.2f, 1.0f, 0.0f, 30, 5, 3, static_cast<uint64_t>(step), 0};
    std::vector<float> all(4 * V), got(2 * V);
    std::vector<int32_t> next(2, -1);
    std::vector<float> logprobs(2, 1.0f);
    ASSERT_TRUE((*with_logits)->Step(slots, toks, all.data()).ok());
    ASSERT_TRUE((*mixed)
                    ->StepMixed(slots, toks, draw_rows, params, masks.data(), next.data(),
                                logprobs.data(), logit_rows, got.data())
                    .ok());
    EXPECT_EQ(std::memcmp(got.data(), all.data(), V * sizeof(float)), 0) << step;
    EXPECT_EQ(std::memcmp(&got[V], &all[2 * V], V * sizeof(float)), 0) << step;
    for (int k = 0; k < 2; ++k) {
      std::vector<float> row(&all[draw_rows[k] * V], &all[(draw_rows[k] + 1) * V]);
      for (int32_t i = 0; i < V; ++i) {
        if (!((masks[k * words + i / 32] >> (i % 32)) & 1u)) row[i] = -INFINITY;
      }
      SamplingConfig cfg;
      cfg.temperature = params[k].temperature;
      cfg.top_p = params[k].top_p;
      cfg.top_k = params[k].top_k;
      cfg.seed = params[k].seed;
      EXPECT_EQ(next[k],
                SampleToken(row.data(), V, cfg, params[k].stream, params[k].position, scratch))
          << "step " << step << " draw " << k;
      if (k == 0) {
        TokenLogprobs want;
        ComputeLogprobs(row.data(), V, next[0], 0, &want);
        EXPECT_NEAR(logprobs[0], want.chosen, 1e-5 * std::max(1.0f, std::fabs(want.chosen)));
      }
    }
    EXPECT_EQ(logprobs[1], 0.0f);  // not asked
    toks = {next[0], 11, next[1], 13};
  }
}

}  // namespace
}  // namespace deepinfer
