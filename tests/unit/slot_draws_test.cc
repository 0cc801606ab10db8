// Draws on the slot stepper (SlotStepper::StepMixed, BatchItem::sample) on the CPU reference
// stepper (engine/model/host_slot_stepper.h), the device forward's contract: a draw picks what the
// host sampler picks from the same step's logits, under its own params and mask, beside rows
// returned as logits; through the Model, items asking for draws get their tokens; bad draws
// change nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <vector>

#include "engine/model/host_slot_stepper.h"
#include "engine/model/model.h"
#include "engine/model/slot_stepper.h"
#include "engine/sampling/sampler.h"
#include "tests/unit/test_util.h"
#include "tests/unit/tiny_model_test.h"

namespace deepinfer {
namespace {

using SlotPathTest = testing::TinyModelTest;

// SampleToken with a row's parameters, on its logits after the mask: what a draw must give.
int32_t HostPick(std::vector<float> row, const SampleParams& p, const uint32_t* mask) {
  for (size_t t = 0; mask != nullptr && t < row.size(); ++t) {
    if (!((mask[t >> 5] >> (t & 31)) & 1u)) row[t] = -INFINITY;
  }
  std::vector<int32_t> scratch;
  return SampleToken(row.data(), static_cast<int32_t>(row.size()), p, scratch);
}

// Draws on the stepper pick, row for row, what the host sampler picks from the same step's
// logits — nucleus, top-k and greedy rows, one under a mask of three tokens — and the picks feed
// the next step; a mixed step returns some rows drawn (with a log-probability where asked) and
// the others as logits. Bad draws (a row
// both drawn and returned, a params count other than the draws, top_p 0, a mask that allows
// nothing) are refused before the step.
TEST_F(SlotPathTest, DrawsOnTheStepperPickWhatTheHostSamplerPicks) {
  Model logits_model(*ck_, *cpu_, Numerics::kReference),
      draws_model(*ck_, *cpu_, Numerics::kReference);
  HostSlotStepper with_logits(logits_model, 3, 16, 8, 128), with_draws(draws_model, 3, 16, 8, 128);
  ASSERT_TRUE(with_draws.SamplesRows());
  const int64_t words = (V_ + 31) / 32;
  std::vector<uint32_t> mask(3 * words, ~0u);
  std::fill_n(&mask[1 * words], words, 0u);
  for (int32_t t : {3, 5, 7}) mask[1 * words + t / 32] |= 1u << (t % 32);
  std::vector<SampleParams> params(3);
  params[0] = {0.9f, 0.8f, 0.0f, -1, 11, 1, 0};
  params[1] = {1.5f, 1.0f, 0.0f, -1, 11, 2, 0};
  params[2] = {0.0f, 1.0f, 0.0f, 20, 11, 3, 0};
  // First a chunk of slot 0 (its last row drawn) beside one row each of slots 1 and 2.
  std::vector<int32_t> slots = {0, 0, 0, 0, 1, 2}, tokens = Tokens(6, 3), rows = {3, 4, 5};
  std::set<int32_t> masked_picks;
  for (int step = 0; step < 6; ++step) {
    for (int r = 0; r < 3; ++r) params[r].position = static_cast<uint64_t>(step);
    const size_t asked = rows.empty() ? slots.size() : rows.size();  // 3 either way
    std::vector<float> logits(asked * V_);
    std::vector<int32_t> next(asked, -1);
    ASSERT_TRUE(with_logits.Step(slots, tokens, rows, logits.data()).ok());
    const Status st = with_draws.StepSample(slots, tokens, rows, params, mask.data(), next.data());
    ASSERT_TRUE(st.ok()) << st.ToString();
    for (int r = 0; r < 3; ++r) {
      const std::vector<float> row(&logits[r * V_], &logits[(r + 1) * V_]);
      EXPECT_EQ(next[r], HostPick(row, params[r], &mask[r * words])) << step << " " << r;
    }
    masked_picks.insert(next[1]);
    slots = {0, 1, 2};
    tokens = next;
    rows = {};  // every row
  }
  EXPECT_TRUE(std::includes(std::set<int32_t>{3, 5, 7}.begin(), std::set<int32_t>{3, 5, 7}.end(),
                            masked_picks.begin(), masked_picks.end()));
  // A mixed step: slot 1's row drawn, slots 0 and 2 returned as logits.
  std::vector<float> all(3 * V_), two(2 * V_);
  ASSERT_TRUE(with_logits.Step(slots, tokens, all.data()).ok());
  const std::vector<int32_t> drawn_row = {1}, logit_rows = {0, 2}, overlap = {1, 2};
  int32_t mixed = -1;
  float logprob = 0;
  params[1].position = 6;
  params[1].logprob = 1;
  EXPECT_EQ(with_draws
                .StepMixed(slots, tokens, drawn_row, {&params[1], 1}, nullptr, &mixed, &logprob,
                           overlap, two.data())
                .code(),
            ErrorCode::kInvalidArgument);  // row 1 both drawn and returned
  ASSERT_TRUE(with_draws
                  .StepMixed(slots, tokens, drawn_row, {&params[1], 1}, nullptr, &mixed, &logprob,
                             logit_rows, two.data())
                  .ok());
  EXPECT_EQ(mixed, HostPick(std::vector<float>(&all[V_], &all[2 * V_]), params[1], nullptr));
  TokenLogprobs want;
  ComputeLogprobs(&all[V_], static_cast<int32_t>(V_), mixed, 0, &want);
  EXPECT_EQ(logprob, want.chosen);
  EXPECT_EQ(std::memcmp(two.data(), all.data(), V_ * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(&two[V_], &all[2 * V_], V_ * sizeof(float)), 0);
  // Draws after a logit row, the second under the three-token mask: each draw reads its own
  // params and mask, not the row's place among the step's rows.
  const std::vector<int32_t> then = {mixed, 8, 9}, draws_02 = {0, 2}, logits_1 = {1};
  ASSERT_TRUE(with_logits.Step(slots, then, all.data()).ok());
  std::vector<uint32_t> masks(2 * words, ~0u);
  std::copy_n(&mask[1 * words], words, &masks[words]);
  std::vector<SampleParams> two_params = {params[0], params[2]};
  two_params[1].temperature = 1.0f;  // not greedy, so the mask decides among three
  std::vector<int32_t> two_next(2, -1);
  std::vector<float> two_logprobs(2, 1.0f);
  ASSERT_TRUE(with_draws
                  .StepMixed(slots, then, draws_02, two_params, masks.data(), two_next.data(),
                             two_logprobs.data(), logits_1, two.data())
                  .ok());
  EXPECT_EQ(two_logprobs, std::vector<float>(2, 0.0f));  // not asked: 0
  EXPECT_EQ(std::memcmp(two.data(), &all[V_], V_ * sizeof(float)), 0);
  EXPECT_EQ(two_next[0], HostPick(std::vector<float>(&all[0], &all[V_]), two_params[0], nullptr));
  EXPECT_EQ(two_next[1],
            HostPick(std::vector<float>(&all[2 * V_], &all[3 * V_]), two_params[1], &masks[words]));
  EXPECT_TRUE(two_next[1] == 3 || two_next[1] == 5 || two_next[1] == 7) << two_next[1];
  const std::vector<int32_t> one_slot = {0}, one_token = {4};
  std::vector<int32_t> next(1);
  EXPECT_EQ(with_draws.StepSample(one_slot, one_token, params, nullptr, next.data()).code(),
            ErrorCode::kInvalidArgument);  // three params for one row
  std::vector<SampleParams> bad(1);
  bad[0].top_p = 0.0f;
  EXPECT_EQ(with_draws.StepSample(one_slot, one_token, bad, nullptr, next.data()).code(),
            ErrorCode::kInvalidArgument);
  const std::vector<uint32_t> nothing(words, 0u);
  EXPECT_EQ(
      with_draws.StepSample(one_slot, one_token, {params.data(), 1}, nothing.data(), next.data())
          .code(),
      ErrorCode::kInvalidArgument);
  EXPECT_EQ(with_draws.length(0), 11);  // the refused draws stepped nothing
}

// Through the Model: items asking for draws get the tokens the host sampler picks from the
// items' logits, an item beside them may take logits in the same step (the host sampler's
// requests), a prompt chunk takes no row, and draws off the slot path are refused.
TEST_F(SlotPathTest, ItemsAskingForDrawsGetTheirTokens) {
  MakeSlotted(3, 16, 8, 128);
  ASSERT_TRUE(slotted_->samples_on_stepper());
  Model plain_inner(*ck_, *cpu_, Numerics::kReference), plain(*ck_, *cpu_, Numerics::kReference);
  HostSlotStepper plain_stepper(plain_inner, 3, 16, 8, 128);
  plain.UseSlots(&plain_stepper);
  const std::vector<int32_t> a = Tokens(5, 1), b = Tokens(12, 2), c = Tokens(3, 3);
  SequenceState da = slotted_->NewSequence(), db = slotted_->NewSequence();
  SequenceState dc = slotted_->NewSequence();
  SequenceState la = plain.NewSequence(), lb = plain.NewSequence(), lc = plain.NewSequence();
  const SampleParams draw{0.7f, 0.9f, 0.05f, 40, 5, 9, 5};
  int32_t token = -1;
  std::vector<float> row(V_), c_got(V_), c_want(V_);
  BatchItem drawn[3] = {{&da, a, nullptr, nullptr, true, &draw, nullptr, &token},
                        {&db, {b.data(), 8}, nullptr, nullptr, true},
                        {&dc, c, c_got.data(), nullptr, true}};
  BatchItem with_logits[3] = {{&la, a, row.data(), nullptr, true},
                              {&lb, {b.data(), 8}, nullptr, nullptr, true},
                              {&lc, c, c_want.data(), nullptr, true}};
  const Status st = slotted_->ForwardBatch(drawn);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_TRUE(plain.ForwardBatch(with_logits).ok());
  EXPECT_EQ(token, HostPick(row, draw, nullptr));
  EXPECT_EQ(std::memcmp(c_got.data(), c_want.data(), V_ * sizeof(float)), 0);
  EXPECT_EQ(da.length, 5);
  EXPECT_EQ(db.length, 8);
  EXPECT_EQ(dc.length, 3);
  // An item asking for both a draw and logits: refused, nothing changed.
  BatchItem both[1] = {{&da, {&token, 1}, row.data(), nullptr, true, &draw, nullptr, &token}};
  EXPECT_EQ(slotted_->ForwardBatch(both).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(da.length, 5);
  EXPECT_EQ(stepper_->length(da.slot.slot()), 5);
  Model layers(*ck_, *cpu_, Numerics::kReference);
  EXPECT_FALSE(layers.samples_on_stepper());
  SequenceState seq = layers.NewSequence();
  BatchItem off_slots[1] = {{&seq, a, nullptr, nullptr, true, &draw, nullptr, &token}};
  EXPECT_EQ(layers.ForwardBatch(off_slots).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(seq.length, 0);
}

}  // namespace
}  // namespace deepinfer
