// The device forward's draws (SlotStepper::StepMixed on engine/backend/cuda/device_forward.h):
// two forwards on one fresh random checkpoint run the same steps (the same kernels, so the same
// logits), one returning logits, one draws. The draws are the CPU sampler's picks
// (engine/sampling/sampler.h) on the other's logits — greedy, nucleus and top-k, under grammar
// masks, for the rows a step asks for, beside rows returned as logits — with the picked token's
// log-probability where asked, and the picks feed the next step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "engine/backend/cuda/device_forward.h"
#include "engine/sampling/sampler.h"
#include "kernels/cuda_available.h"
#include "kernels/sample_topk.h"
#include "tests/gpu/kernel_shaped_spec.h"
#include "tests/unit/test_util.h"

namespace deepinfer {
namespace {

// A forward for logits and one for draws over the same kernel-shaped random checkpoint.
struct TwoForwards {
  testing::TempDir dir;
  std::unique_ptr<Checkpoint> ck;
  std::unique_ptr<DeviceForward> logits, draws;
  int32_t V = 0;
  int64_t words = 0;
};

std::unique_ptr<TwoForwards> MakeTwo(const DeviceForwardOptions& opt) {
  auto two = std::make_unique<TwoForwards>();
  two->ck = testing::KernelShapedCheckpoint(two->dir, std::random_device{}());
  if (two->ck == nullptr) return nullptr;
  auto a = DeviceForward::Create(*two->ck, opt), b = DeviceForward::Create(*two->ck, opt);
  if (!a.ok() || !b.ok()) return nullptr;
  two->logits = std::move(a).value();
  two->draws = std::move(b).value();
  two->V = two->ck->config.vocab_size;
  two->words = (two->V + 31) / 32;
  return two;
}

// Three rows a step over three slots, as the draws' tests below step them.
DeviceForwardOptions ThreeRows() {
  DeviceForwardOptions opt;
  opt.max_batch = 3;
  opt.slots = 3;
  opt.max_context = 128;
  return opt;
}

// The CPU sampler's pick from `row` after `mask` (null: none), and its log-probability.
int32_t CpuPick(const float* row, int32_t V, const uint32_t* mask, const SampleParams& p,
                float* logprob = nullptr) {
  std::vector<float> masked(row, row + V);
  for (int32_t i = 0; mask != nullptr && i < V; ++i) {
    if (!((mask[i / 32] >> (i % 32)) & 1u)) masked[i] = -INFINITY;
  }
  std::vector<int32_t> scratch;
  const int32_t token = SampleToken(masked.data(), V, p, scratch);
  if (logprob != nullptr) {
    TokenLogprobs lp;
    ComputeLogprobs(masked.data(), V, token, 0, &lp);
    *logprob = lp.chosen;
  }
  return token;
}

// One step of slots 0-2, every row drawn with `params` under `mask` (three rows of `words`): each
// draw is the CPU sampler's pick from the logits forward's logits of the same step, with its
// log-probability where asked (0 where not). The picks become `toks`, the next step's input.
void ExpectThreeCpuDraws(TwoForwards& two, std::vector<int32_t>& toks,
                         const std::vector<kernels::SampleParams>& params,
                         const std::vector<uint32_t>& mask, int step) {
  const int32_t V = two.V;
  const int64_t words = two.words;
  const std::vector<int32_t> slots = {0, 1, 2}, rows = {0, 1, 2};
  std::vector<float> logits(3 * V), logprobs(3, 1.0f);
  std::vector<int32_t> next(3, -1);
  ASSERT_TRUE(two.logits->Step(slots, toks, logits.data()).ok());
  ASSERT_TRUE(two.draws
                  ->StepMixed(slots, toks, rows, params, mask.data(), next.data(), logprobs.data(),
                              {}, nullptr)
                  .ok());
  for (int r = 0; r < 3; ++r) {
    float want_logprob = 0;
    EXPECT_EQ(next[r], CpuPick(&logits[r * V], V, &mask[r * words], params[r], &want_logprob))
        << "step " << step << " row " << r;
    if (params[r].logprob) {
      EXPECT_NEAR(logprobs[r], want_logprob, 1e-5 * std::max(1.0f, std::fabs(want_logprob)));
    } else {
      EXPECT_EQ(logprobs[r], 0.0f);
    }
  }
  toks = next;
}

// Every row drawn, under greedy, nucleus and top-k sampling, one row under a fresh random mask.
TEST(DeviceForwardTest, SamplesWhatTheCpuSamplerPicks) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  auto two = MakeTwo(ThreeRows());
  ASSERT_NE(two, nullptr);
  const int32_t V = two->V;
  const int64_t words = two->words;
  std::mt19937 rng(std::random_device{}());
  const std::vector<int32_t> slots = {1, 2, 0};
  std::vector<int32_t> toks = {3, 5, 7}, next(3);
  std::vector<float> logits(3 * V);
  std::vector<uint32_t> mask(3 * words, ~0u);
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
    ASSERT_TRUE(two->logits->Step(slots, toks, logits.data()).ok());
    ASSERT_TRUE(two->draws->StepSample(slots, toks, params, mask.data(), next.data()).ok());
    for (int r = 0; r < 3; ++r) {
      EXPECT_EQ(next[r], CpuPick(&logits[r * V], V, &mask[r * words], params[r]))
          << "step " << step << " row " << r;
    }
    toks = next;
  }
  EXPECT_EQ(two->draws->length(0), 24);
}

// A step whose draws have no cut (V4's card: temperature 1, top_p 1; a min-p floor; a greedy
// row beside them) walks the ids in order without a sort and picks what the CPU sampler picks,
// under a mask too, with the log-probability asked for.
TEST(DeviceForwardTest, DrawsWithoutACutWalkTheIds) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  auto two = MakeTwo(ThreeRows());
  ASSERT_NE(two, nullptr);
  const int64_t words = two->words;
  std::mt19937 rng(std::random_device{}());
  std::vector<int32_t> toks = {3, 5, 7};
  for (int step = 0; step < 12; ++step) {
    std::vector<uint32_t> mask(3 * words, ~0u);
    for (int64_t w = 0; w < words; ++w) mask[words + w] = static_cast<uint32_t>(rng());
    mask[words] |= 1u;
    const auto at = static_cast<uint64_t>(step);
    const std::vector<kernels::SampleParams> params = {{1.0f, 1.0f, 0.0f, -1, 9, 0, at, 1},
                                                       {0.7f, 1.0f, 0.1f, -1, 9, 1, at, 0},
                                                       {0.0f, 1.0f, 0.0f, -1, 9, 2, at, 1}};
    ExpectThreeCpuDraws(*two, toks, params, mask, step);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// Nucleus draws without a top-k cut among the selected candidates (kernels::NucleusRows) where
// they end there (T 0.05: no draw drawn again); draws that run past them (T 4 over the tiny
// model's 512 ids, or a mask's ~256, at top-p 0.99 and 0.9) drawn again sorted by the draws'
// Collect: one of three at step 3, under a mask, alone; two of three at step 5, after which the
// steps sort at once (step 6's is not drawn again). Every step's tokens and log-probabilities are
// the CPU sampler's.
TEST(DeviceForwardTest, NucleusDrawsCutAmongTheSelectedOrSortAgain) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  auto two = MakeTwo(ThreeRows());
  ASSERT_NE(two, nullptr);
  const int32_t V = two->V;
  const int64_t words = two->words;
  ASSERT_GE(V, kernels::kTopKMax);  // else the draws sort every step
  std::mt19937 rng(std::random_device{}());
  std::vector<int32_t> toks = {3, 5, 7};
  for (int step = 0; step < 8; ++step) {
    std::vector<uint32_t> mask(3 * words, ~0u);
    for (int64_t w = 0; w < words; ++w) mask[2 * words + w] = static_cast<uint32_t>(rng());
    mask[2 * words] |= 1u;
    const auto at = static_cast<uint64_t>(step);
    const float t0 = step == 5 ? 4.0f : 0.05f;
    const float t2 = step == 3 || step == 5 || step == 6 ? 4.0f : 0.05f;
    const std::vector<kernels::SampleParams> params = {{t0, 0.99f, 0.0f, -1, 9, 0, at, 1},
                                                       {0.0f, 1.0f, 0.0f, -1, 9, 1, at, 0},
                                                       {t2, 0.9f, 0.0f, -1, 9, 2, at, 1}};
    ExpectThreeCpuDraws(*two, toks, params, mask, step);
    if (::testing::Test::HasFatalFailure()) return;
    EXPECT_EQ(two->draws->redrawn_draws(), step < 3 ? 0 : step < 5 ? 1 : 3) << "step " << step;
  }
}

// Asked for some rows (a prompt chunk's last beside a decode row), the draws read exactly those
// rows' logits; the second draw reports its log-probability, the first, not asked, 0.
TEST(DeviceForwardTest, DrawsTheRowsAskedFor) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  DeviceForwardOptions opt;
  opt.max_batch = 8;
  opt.max_chunk = 4;
  opt.slots = 2;
  opt.max_context = 128;
  auto two = MakeTwo(opt);
  ASSERT_NE(two, nullptr);
  const int32_t V = two->V;
  std::vector<int32_t> slots = {0, 0, 0, 0, 1}, toks = {3, 5, 7, 9, 11}, rows = {3, 4};
  for (int step = 0; step < 6; ++step) {
    std::vector<kernels::SampleParams> params(2);
    for (int r = 0; r < 2; ++r) {
      params[r] = {0.9f,
                   1.0f,
                   0.0f,
                   50,
                   77,
                   static_cast<uint64_t>(r),
                   static_cast<uint64_t>(step),
                   static_cast<uint32_t>(r == 1 && step % 2 == 0)};  // odd steps: none asks
    }
    std::vector<float> logits(2 * V), logprobs(2, 1.0f);
    std::vector<int32_t> next(2, -1);
    ASSERT_TRUE(two->logits->Step(slots, toks, rows, logits.data()).ok());
    ASSERT_TRUE(two->draws
                    ->StepMixed(slots, toks, rows, params, nullptr, next.data(), logprobs.data(),
                                {}, nullptr)
                    .ok());
    float want_logprob = 0;
    EXPECT_EQ(next[0], CpuPick(&logits[0], V, nullptr, params[0])) << "step " << step;
    EXPECT_EQ(next[1], CpuPick(&logits[V], V, nullptr, params[1], &want_logprob))
        << "step " << step;
    if (step % 2 == 0) {
      EXPECT_NEAR(logprobs[1], want_logprob, 1e-5 * std::max(1.0f, std::fabs(want_logprob)));
    } else {
      EXPECT_EQ(logprobs[1], 0.0f) << "step " << step;  // not asked: no kernel, still 0
    }
    EXPECT_EQ(logprobs[0], 0.0f);  // not asked
    slots = {0, 1};
    toks = next;
    rows = {};
  }
  EXPECT_EQ(two->draws->length(0), 9);
}

// A mixed step: logit rows 0 and 2 come back as Step returns them, draws 1 and 3 (the second
// under a mask, the first with its log-probability) pick what the CPU sampler picks from Step's
// rows 1 and 3 — each draw reading its own params, mask and row, not the row's place in the step.
TEST(DeviceForwardTest, MixedStepsReturnLogitsBesideDraws) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  DeviceForwardOptions opt;
  opt.max_batch = 4;
  opt.slots = 4;
  opt.max_context = 128;
  auto two = MakeTwo(opt);
  ASSERT_NE(two, nullptr);
  const int32_t V = two->V;
  const int64_t words = two->words;
  std::mt19937 rng(std::random_device{}());
  const std::vector<int32_t> slots = {0, 1, 2, 3}, draw_rows = {1, 3}, logit_rows = {0, 2};
  std::vector<int32_t> toks = {3, 5, 7, 9};
  for (int step = 0; step < 6; ++step) {
    std::vector<uint32_t> masks(2 * words, ~0u);
    for (int64_t w = 0; w < words; ++w) masks[words + w] = static_cast<uint32_t>(rng());
    masks[words] |= 1u;
    std::vector<kernels::SampleParams> params(2);
    params[0] = {0.8f, 0.9f, 0.0f, -1, 5, 1, static_cast<uint64_t>(step), 1};
    params[1] = {1.2f, 1.0f, 0.0f, 30, 5, 3, static_cast<uint64_t>(step), 0};
    std::vector<float> all(4 * V), got(2 * V), logprobs(2, 1.0f);
    std::vector<int32_t> next(2, -1);
    ASSERT_TRUE(two->logits->Step(slots, toks, all.data()).ok());
    ASSERT_TRUE(two->draws
                    ->StepMixed(slots, toks, draw_rows, params, masks.data(), next.data(),
                                logprobs.data(), logit_rows, got.data())
                    .ok());
    EXPECT_EQ(std::memcmp(got.data(), all.data(), V * sizeof(float)), 0) << step;
    EXPECT_EQ(std::memcmp(&got[V], &all[2 * V], V * sizeof(float)), 0) << step;
    float want_logprob = 0;
    EXPECT_EQ(next[0], CpuPick(&all[1 * V], V, &masks[0], params[0], &want_logprob)) << step;
    EXPECT_EQ(next[1], CpuPick(&all[3 * V], V, &masks[words], params[1])) << step;
    EXPECT_NEAR(logprobs[0], want_logprob, 1e-5 * std::max(1.0f, std::fabs(want_logprob)));
    EXPECT_EQ(logprobs[1], 0.0f);  // not asked
    toks = {next[0], 11, next[1], 13};
  }
}

}  // namespace
}  // namespace deepinfer
