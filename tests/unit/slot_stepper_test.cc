// The slot contract (engine/model/slot_stepper.h): which steps are accepted, slot leases, and the
// Model's slot path on the CPU reference stepper (engine/model/host_slot_stepper.h) — the same
// logits as the Model's own forward, bit for bit, for chunks and decode rows mixed; slots reused
// after their sequence ends; copies, exhaustion and oversized steps refused without changing
// anything. Draws on the stepper: slot_draws_test.cc.
#include "engine/model/slot_stepper.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "engine/model/host_slot_stepper.h"
#include "engine/model/model.h"
#include "tests/unit/test_util.h"
#include "tests/unit/tiny_model_test.h"

namespace deepinfer {
namespace {

TEST(SlotStepperTest, BadStepsAreRefusedAndLeaveNoMarks) {
  const StepLimits lim{4, 8, 3, 16, 100};
  const int64_t lengths[4] = {0, 14, 5, 0};
  std::vector<uint8_t> seen(4, 0);
  const auto check = [&](std::vector<int32_t> slots, std::vector<int32_t> tokens) {
    const Status st = CheckStepRows(slots, tokens, lengths, lim, seen);
    EXPECT_EQ(seen, std::vector<uint8_t>(4, 0));
    return st.ok() ? std::string() : st.message();
  };
  EXPECT_EQ(check({0, 0, 0, 2, 3}, {1, 2, 3, 4, 5}), "");  // a chunk of 3 and two decode rows
  EXPECT_EQ(check({1, 1}, {1, 2}), "");                    // 14 + 2 = 16 fits
  EXPECT_NE(check({1, 1, 1}, {1, 2, 3}).find("full"), std::string::npos);
  EXPECT_NE(check({0, 0, 0, 0}, {1, 2, 3, 4}).find("max_chunk"), std::string::npos);
  EXPECT_NE(check({0, 2, 0}, {1, 2, 3}).find("consecutive"), std::string::npos);
  EXPECT_NE(check({4}, {1}).find("bad slot"), std::string::npos);
  EXPECT_NE(check({-1}, {1}).find("bad slot"), std::string::npos);
  EXPECT_NE(check({2}, {100}).find("out of range"), std::string::npos);
  EXPECT_NE(check({0}, {1, 2}).find("one token per row"), std::string::npos);
  EXPECT_NE(check(std::vector<int32_t>(9, 0), std::vector<int32_t>(9, 1)).find("at most 8 rows"),
            std::string::npos);
}

TEST(SlotStepperTest, LogitRowsAreRowsOfTheStepInOrder) {
  EXPECT_TRUE(CheckLogitRows({}, 3).ok());
  const std::vector<int32_t> good = {0, 2}, twice = {1, 1}, back = {2, 0}, past = {3},
                             negative = {-1};
  EXPECT_TRUE(CheckLogitRows(good, 3).ok());
  for (const auto* bad : {&twice, &back, &past, &negative}) {
    EXPECT_EQ(CheckLogitRows(*bad, 3).code(), ErrorCode::kInvalidArgument);
  }
}

TEST(SlotStepperTest, LeasesGiveTheirSlotBackAndCopiesHoldNone) {
  auto pool = std::make_shared<SlotPool>(2);
  {
    SlotLease a(pool, pool->Take());
    EXPECT_EQ(a.slot(), 0);
    SlotLease b(pool, pool->Take());
    EXPECT_EQ(b.slot(), 1);
    SlotLease none(pool, pool->Take());  // every slot leased
    EXPECT_EQ(none.slot(), -1);
    EXPECT_TRUE(none.leased());
    const SlotLease copy = a;
    EXPECT_EQ(copy.slot(), -1);
    EXPECT_TRUE(copy.copied());
    EXPECT_FALSE(copy.leased());
    SlotLease moved = std::move(b);
    EXPECT_EQ(moved.slot(), 1);
    EXPECT_EQ(pool->free_slots(), 0);
  }
  EXPECT_EQ(pool->free_slots(), 2);  // the copy gave nothing back twice
  SlotLease again(pool, pool->Take());
  EXPECT_EQ(again.slot(), 0);  // the last one given back: `a`, which ended last
}

using SlotPathTest = testing::TinyModelTest;

// Two sequences' prompts in chunks beside each other's decode rows: every logit equals the plain
// Model's, and each sequence's length follows.
TEST_F(SlotPathTest, StepsOnSlotsGiveTheModelsLogits) {
  Model inner(*ck_, *cpu_, Numerics::kReference), slotted(*ck_, *cpu_, Numerics::kReference);
  HostSlotStepper stepper(inner, 3, 64, 40, 256);
  slotted.UseSlots(&stepper);
  EXPECT_FALSE(slotted.has_mtp());
  Model plain(*ck_, *cpu_, Numerics::kReference);
  const std::vector<int32_t> a = Tokens(90, 1), b = Tokens(60, 2);
  SequenceState sa = slotted.NewSequence(), sb = slotted.NewSequence();
  SequenceState pa = plain.NewSequence(), pb = plain.NewSequence();
  // (rows of a, rows of b) per step; b's logits only for its last row.
  const std::vector<std::pair<int, int>> steps = {{1, 32}, {32, 1}, {20, 27}, {37, 0}};
  int64_t da = 0, db = 0;
  for (auto [na, nb] : steps) {
    std::vector<float> got(static_cast<size_t>(na + 1) * V_), want(got.size());
    BatchItem s_items[2] = {{&sa, {&a[da], static_cast<size_t>(na)}, got.data(), nullptr, false},
                            {&sb, {&b[db], static_cast<size_t>(nb)}, &got[na * V_], nullptr, true}};
    BatchItem p_items[2] = {
        {&pa, {&a[da], static_cast<size_t>(na)}, want.data(), nullptr, false},
        {&pb, {&b[db], static_cast<size_t>(nb)}, &want[na * V_], nullptr, true}};
    const Status st = slotted.ForwardBatch(s_items);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_TRUE(plain.ForwardBatch(p_items).ok());
    const int64_t n_rows = na + (nb > 0 ? 1 : 0);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), n_rows * V_ * sizeof(float)), 0)
        << "step of " << na << " + " << nb;
    da += na;
    db += nb;
  }
  EXPECT_EQ(sa.length, 90);
  EXPECT_EQ(sb.length, 60);
  EXPECT_EQ(stepper.length(sa.slot.slot()), 90);
}

// Asked for some rows, a step returns those rows' logits, in order, as a step returning all.
TEST_F(SlotPathTest, AStepReturnsTheRowsAskedFor) {
  Model all_model(*ck_, *cpu_, Numerics::kExact), some_model(*ck_, *cpu_, Numerics::kExact);
  HostSlotStepper all(all_model, 2, 16, 8, 128), some(some_model, 2, 16, 8, 128);
  // Row 2 lies inside slot 0's chunk, 4 ends it, 5 is slot 1's.
  const std::vector<int32_t> slots = {0, 0, 0, 0, 0, 1}, tokens = Tokens(6, 5), rows = {2, 4, 5};
  std::vector<float> every(6 * V_), chosen(3 * V_);
  ASSERT_TRUE(all.Step(slots, tokens, every.data()).ok());
  ASSERT_TRUE(some.Step(slots, tokens, rows, chosen.data()).ok());
  for (size_t k = 0; k < rows.size(); ++k) {
    EXPECT_EQ(std::memcmp(&chosen[k * V_], &every[rows[k] * V_], V_ * sizeof(float)), 0) << k;
  }
  const std::vector<int32_t> unordered = {1, 0};
  EXPECT_EQ(some.Step({slots.data(), 2}, {tokens.data(), 2}, unordered, chosen.data()).code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(some.length(0), 5);  // the refused step changed nothing
}

TEST_F(SlotPathTest, EndedSequencesFreeTheirSlotsForFreshOnes) {
  Model inner(*ck_, *cpu_, Numerics::kExact), slotted(*ck_, *cpu_, Numerics::kExact);
  HostSlotStepper stepper(inner, 1, 16, 16, 128);
  slotted.UseSlots(&stepper);
  const std::vector<int32_t> t = Tokens(9, 3);
  std::vector<float> first(V_), again(V_);
  {
    SequenceState s = slotted.NewSequence();
    ASSERT_TRUE(slotted.Forward(s, {t.data(), 9}, nullptr, nullptr).ok());
    // The only slot is leased: a second sequence holds none and its step says why.
    SequenceState other = slotted.NewSequence();
    const Status st = slotted.Forward(other, {t.data(), 1}, first.data(), nullptr);
    EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(st.message().find("every slot is leased"), std::string::npos) << st.message();
    // A copy of a state holds no slot and is refused, the original untouched.
    SequenceState copy = s;
    const Status copied = slotted.Forward(copy, {t.data(), 1}, first.data(), nullptr);
    EXPECT_NE(copied.message().find("copied"), std::string::npos) << copied.message();
    EXPECT_EQ(s.length, 9);
    EXPECT_EQ(stepper.length(0), 9);
    // A step over the slots' rows is refused before anything runs.
    const std::vector<int32_t> long_chunk = Tokens(17, 4);
    EXPECT_EQ(slotted.Forward(s, long_chunk, nullptr, nullptr).code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(s.length, 9);
    // One sequence twice in a batch is refused.
    BatchItem twice[2] = {{&s, {t.data(), 1}, nullptr, nullptr, false},
                          {&s, {t.data(), 1}, nullptr, nullptr, false}};
    EXPECT_NE(slotted.ForwardBatch(twice).message().find("twice"), std::string::npos);
    EXPECT_EQ(s.length, 9);
    // Streams (the MTP's input) are not on this path.
    std::vector<float> streams(V_ * 64);
    EXPECT_EQ(slotted.Forward(s, {t.data(), 1}, first.data(), streams.data()).code(),
              ErrorCode::kInvalidArgument);
  }
  // The slot came back; the fresh sequence on it starts from an empty cache.
  SequenceState fresh = slotted.NewSequence();
  EXPECT_EQ(fresh.slot.slot(), 0);
  ASSERT_TRUE(slotted.Forward(fresh, {t.data(), 1}, first.data(), nullptr).ok());
  Model plain(*ck_, *cpu_, Numerics::kExact);
  SequenceState p = plain.NewSequence();
  ASSERT_TRUE(plain.Forward(p, {t.data(), 1}, again.data(), nullptr).ok());
  EXPECT_EQ(std::memcmp(first.data(), again.data(), V_ * sizeof(float)), 0);
}

// A copied slot continues as its source would, and each of the two then goes its own way (a step
// on one leaves the other's rows alone); copies onto itself or out of range change nothing. The
// Model's CopySequence leases the copy's slot and says why when it cannot.
TEST_F(SlotPathTest, ACopiedSlotContinuesAsItsSource) {
  Model inner(*ck_, *cpu_, Numerics::kExact), slotted(*ck_, *cpu_, Numerics::kExact);
  HostSlotStepper stepper(inner, 3, 16, 16, 128);
  EXPECT_TRUE(stepper.CopiesSlots());
  const std::vector<int32_t> a = Tokens(12, 6), b = Tokens(3, 7), c = Tokens(3, 8);
  const std::vector<int32_t> on0(12, 0);
  std::vector<float> every(12 * V_);
  ASSERT_TRUE(stepper.Step(on0, a, every.data()).ok());
  ASSERT_EQ(stepper.length(0), 12);
  EXPECT_EQ(stepper.CopySlot(0, 0).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(stepper.CopySlot(0, 3).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(stepper.CopySlot(-1, 1).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(stepper.length(1), 0);
  ASSERT_TRUE(stepper.CopySlot(0, 1).ok());
  EXPECT_EQ(stepper.length(1), 12);
  // Slot 0 takes b, slot 1 takes c: each as a plain Model after a + b, a + c.
  const std::vector<int32_t> on0_3(3, 0), on1_3(3, 1);
  std::vector<float> got_b(3 * V_), got_c(3 * V_), want(15 * V_);
  ASSERT_TRUE(stepper.Step(on0_3, b, got_b.data()).ok());
  ASSERT_TRUE(stepper.Step(on1_3, c, got_c.data()).ok());
  for (const auto& [tail, got] : {std::pair{&b, &got_b}, std::pair{&c, &got_c}}) {
    Model plain(*ck_, *cpu_, Numerics::kExact);
    SequenceState p = plain.NewSequence();
    std::vector<int32_t> all = a;
    all.insert(all.end(), tail->begin(), tail->end());
    ASSERT_TRUE(plain.Forward(p, all, want.data(), nullptr).ok());
    EXPECT_EQ(std::memcmp(got->data(), &want[12 * V_], got->size() * sizeof(float)), 0);
  }
  // Through the Model: a copy leases a free slot and holds the source's length.
  slotted.UseSlots(&stepper);
  EXPECT_TRUE(slotted.copies_sequences());
  SequenceState s = slotted.NewSequence();
  ASSERT_TRUE(slotted.Forward(s, a, nullptr, nullptr).ok());
  Result<SequenceState> copy = slotted.CopySequence(s);
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  EXPECT_NE(copy->slot.slot(), s.slot.slot());
  EXPECT_EQ(copy->length, 12);
  EXPECT_EQ(stepper.length(copy->slot.slot()), 12);
  SequenceState third = slotted.NewSequence();  // every slot leased now
  EXPECT_EQ(slotted.CopySequence(s).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(slotted.CopySequence(SequenceState()).status().code(), ErrorCode::kInvalidArgument);
  Model plain(*ck_, *cpu_, Numerics::kExact);  // no slots: nothing to copy into
  EXPECT_FALSE(plain.copies_sequences());
  EXPECT_EQ(plain.CopySequence(s).status().code(), ErrorCode::kUnimplemented);
}

// The injected fault (the device forward's fault on the CPU reference): valid steps count down
// to it, a refused step does not count, and from the fault on every Step and ResetSlot returns
// it and fault() reports it.
TEST_F(SlotPathTest, AnInjectedFaultStopsEveryLaterCall) {
  Model inner(*ck_, *cpu_, Numerics::kExact);
  HostSlotStepper stepper(inner, 2, 16, 16, 128);
  stepper.FailAfter(2);
  const std::vector<int32_t> slots = {0, 1}, tokens = Tokens(2, 5);
  std::vector<float> logits(2 * V_);
  EXPECT_TRUE(stepper.fault().ok());
  ASSERT_TRUE(stepper.Step(slots, tokens, logits.data()).ok());
  const std::vector<int32_t> bad_slot = {0, 7};
  EXPECT_EQ(stepper.Step(bad_slot, tokens, logits.data()).code(), ErrorCode::kInvalidArgument);
  ASSERT_TRUE(stepper.Step(slots, tokens, logits.data()).ok());
  const Status st = stepper.Step(slots, tokens, logits.data());
  EXPECT_EQ(st.code(), ErrorCode::kInternal);
  EXPECT_NE(st.message().find("injected fault"), std::string::npos) << st.message();
  EXPECT_EQ(stepper.fault().code(), ErrorCode::kInternal);
  EXPECT_EQ(stepper.length(0), 2);  // the faulted step appended nothing here
  EXPECT_EQ(stepper.Step(slots, tokens, logits.data()).code(), ErrorCode::kInternal);
  EXPECT_EQ(stepper.ResetSlot(0).code(), ErrorCode::kInternal);
}

}  // namespace
}  // namespace deepinfer
