// Parked slots (engine/cache/parked_slots.h) on the Model's slot path over the CPU reference
// stepper: a request continuing a parked sequence gets the logits of the forward from scratch,
// bit for bit; only whole parked keys that are strict prefixes match; parking past capacity and
// dropping give the slots back.
#include "engine/cache/parked_slots.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "engine/model/host_slot_stepper.h"
#include "engine/model/model.h"
#include "tests/unit/tiny_model_test.h"

namespace deepinfer {
namespace {

class ParkedSlotsTest : public testing::TinyModelTest {
 protected:
  void SetUp() override {
    TinyModelTest::SetUp();
    if (!HasFatalFailure()) MakeSlotted(3, 64, 16, 256);
  }
  // A slotted sequence fed `tokens` in chunks of at most 16.
  SequenceState Fed(std::span<const int32_t> tokens) {
    SequenceState s = slotted_->NewSequence();
    for (size_t i = 0; i < tokens.size(); i += 16) {
      const size_t n = std::min<size_t>(16, tokens.size() - i);
      EXPECT_TRUE(slotted_->Forward(s, tokens.subspan(i, n), nullptr, nullptr).ok());
    }
    return s;
  }
};

// The next turn of a conversation: its context repeats the parked tokens and adds more. It
// continues on the parked slot, feeding only the new tokens, and its logits are those of a plain
// Model that fed everything from the start.
TEST_F(ParkedSlotsTest, AContinuationOnAParkedSlotGivesTheForwardFromScratch) {
  ParkedSlots parked(3);
  const std::vector<int32_t> turn = Tokens(40, 1);
  const std::span<const int32_t> first(turn.data(), 29);
  parked.Park({first.begin(), first.end()}, Fed(first));
  EXPECT_EQ(parked.size(), 1u);
  EXPECT_EQ(slotted_->slots_free(), 2);  // the parked state keeps its slot
  SequenceState resumed;
  ASSERT_EQ(parked.Take(turn, &resumed), 29);
  EXPECT_EQ(parked.size(), 0u);
  EXPECT_EQ(resumed.length, 29);
  std::vector<float> got(11 * V_), want(40 * V_);
  ASSERT_TRUE(slotted_->Forward(resumed, std::span(turn).subspan(29), got.data(), nullptr).ok());
  Model plain(*ck_, *cpu_, Numerics::kReference);
  SequenceState p = plain.NewSequence();
  ASSERT_TRUE(plain.Forward(p, turn, want.data(), nullptr).ok());
  EXPECT_EQ(std::memcmp(got.data(), &want[29 * V_], got.size() * sizeof(float)), 0);
  EXPECT_EQ(parked.hit_tokens(), 29u);
  EXPECT_EQ(parked.lookup_tokens(), 40u);
}

// Only a parked key that is all of a strict prefix of the context matches, the longest first: a
// key that leaves the context before its end, one as long as the context, or one longer do not.
TEST_F(ParkedSlotsTest, OnlyWholeKeysThatAreStrictPrefixesMatch) {
  ParkedSlots parked(3);
  const std::vector<int32_t> ctx = Tokens(30, 2);
  std::vector<int32_t> diverging(ctx.begin(), ctx.begin() + 20);
  diverging[12] = (diverging[12] + 1) % static_cast<int32_t>(V_);
  parked.Park(diverging, Fed(diverging));
  parked.Park(ctx, Fed(ctx));  // all of the context: no token left to produce logits from
  SequenceState got;
  EXPECT_EQ(parked.Take(ctx, &got), 0);
  EXPECT_EQ(parked.size(), 2u);
  const std::vector<int32_t> shorter(ctx.begin(), ctx.begin() + 25);  // the keys run past it
  EXPECT_EQ(parked.Take(shorter, &got), 0);
  while (parked.DropOldest()) {
  }
  // The shorter of two matching keys loses to the longer.
  ParkedSlots two(3);
  two.Park({ctx.begin(), ctx.begin() + 8}, Fed(std::span(ctx).first(8)));
  two.Park({ctx.begin(), ctx.begin() + 17}, Fed(std::span(ctx).first(17)));
  EXPECT_EQ(two.Take(ctx, &got), 17);
  EXPECT_EQ(got.length, 17);
  EXPECT_EQ(two.Take(ctx, &got), 8);
  EXPECT_EQ(two.Take(ctx, &got), 0);
}

// Parked states hold their slots until dropped: past capacity the oldest goes first, DropOldest
// gives one back, and states without a slot or without tokens are not kept.
TEST_F(ParkedSlotsTest, DroppingGivesTheSlotsBack) {
  ParkedSlots parked(2);
  const std::vector<int32_t> a = Tokens(5, 3), b = Tokens(6, 4), c = Tokens(7, 5);
  parked.Park(a, Fed(a));
  parked.Park(b, Fed(b));
  EXPECT_EQ(slotted_->slots_free(), 1);
  parked.Park(c, Fed(c));  // at capacity: `a`'s state is dropped
  EXPECT_EQ(parked.size(), 2u);
  EXPECT_EQ(slotted_->slots_free(), 1);
  SequenceState got;
  std::vector<int32_t> a_more = a, b_more = b;
  a_more.push_back(1);
  b_more.push_back(1);
  EXPECT_EQ(parked.Take(a_more, &got), 0);
  EXPECT_TRUE(parked.DropOldest());  // `b`
  EXPECT_EQ(parked.Take(b_more, &got), 0);
  EXPECT_EQ(slotted_->slots_free(), 2);
  EXPECT_TRUE(parked.DropOldest());  // `c`
  EXPECT_FALSE(parked.DropOldest());
  EXPECT_EQ(slotted_->slots_free(), 3);
  parked.Park(a, SequenceState());  // no slot
  parked.Park({}, Fed(a));          // no tokens
  EXPECT_EQ(parked.size(), 0u);
  EXPECT_EQ(slotted_->slots_free(), 3);
  // States another request is about to continue give way last.
  parked.Park(a, Fed(a));
  parked.Park(b, Fed(b));
  const auto wants_a = [&](std::span<const int32_t> key) {
    return std::equal(key.begin(), key.end(), a.begin(), a.end());
  };
  EXPECT_TRUE(parked.DropOldest(wants_a));  // `b`, though `a` is older
  EXPECT_EQ(parked.Take(a_more, &got), 5);
  parked.Park(b, Fed(b));
  EXPECT_TRUE(parked.DropOldest([](std::span<const int32_t>) { return true; }));  // all wanted
  EXPECT_EQ(parked.size(), 0u);
  got = SequenceState();
  ParkedSlots none(0);
  none.Park(a, Fed(a));
  EXPECT_EQ(none.size(), 0u);
}

// A donor (a copy of a sequence's slot under the tokens it held) is copied for every request that
// extends its tokens and stays: each copy continues as the forward from scratch would, bit for
// bit, while the sequence it was copied from moves on undisturbed. Without a copier, or with no
// slot free for the copy, nothing is taken and the donor stays.
TEST_F(ParkedSlotsTest, ADonorIsCopiedForEachRequestAndStays) {
  ParkedSlots parked(3);
  const std::vector<int32_t> system = Tokens(32, 6);
  SequenceState running = Fed(system);
  Result<SequenceState> donor = slotted_->CopySequence(running);
  ASSERT_TRUE(donor.ok()) << donor.status().ToString();
  EXPECT_EQ(donor->length, 32);
  parked.Share(system, std::move(donor).value());
  parked.Share(system, Fed(system));  // the same tokens again: the first donor stays
  EXPECT_EQ(parked.size(), 1u);
  EXPECT_EQ(parked.shared(), 1u);
  EXPECT_TRUE(parked.Shares(system));
  // The running sequence moves on: the donor's copy must not see its new rows.
  const std::vector<int32_t> more = Tokens(9, 7);
  ASSERT_TRUE(slotted_->Forward(running, more, nullptr, nullptr).ok());
  Model plain(*ck_, *cpu_, Numerics::kReference);
  const ParkedSlots::Copier copy = [&](const SequenceState& d) {
    return slotted_->CopySequence(d);
  };
  for (int32_t seed : {8, 9}) {  // two requests with the system prompt and their own question
    std::vector<int32_t> ctx = system;
    const std::vector<int32_t> question = Tokens(11, seed);
    ctx.insert(ctx.end(), question.begin(), question.end());
    EXPECT_EQ(parked.Find(ctx).length, 32);
    EXPECT_TRUE(parked.Find(ctx).shared);
    SequenceState got;
    EXPECT_EQ(parked.Take(ctx, &got), 0);  // donors need a copier
    ASSERT_EQ(parked.Take(ctx, &got, copy), 32);
    EXPECT_EQ(got.length, 32);
    std::vector<float> logits(11 * V_), want(ctx.size() * V_);
    ASSERT_TRUE(slotted_->Forward(got, question, logits.data(), nullptr).ok());
    SequenceState p = plain.NewSequence();
    ASSERT_TRUE(plain.Forward(p, ctx, want.data(), nullptr).ok());
    EXPECT_EQ(std::memcmp(logits.data(), &want[32 * V_], logits.size() * sizeof(float)), 0);
    EXPECT_EQ(parked.shared(), 1u);  // the donor stays
  }
  EXPECT_EQ(parked.hit_tokens(), 64u);
  // Every slot leased (running, the donor, `hold`): the copy fails, nothing is taken.
  SequenceState hold = slotted_->NewSequence();
  EXPECT_EQ(slotted_->slots_free(), 0);
  std::vector<int32_t> ctx = system;
  ctx.push_back(3);
  SequenceState got;
  Status why;
  EXPECT_EQ(parked.Take(ctx, &got, copy, &why), 0);
  EXPECT_FALSE(why.ok());
  EXPECT_EQ(parked.shared(), 1u);
  EXPECT_EQ(parked.hit_tokens(), 64u);
  // Protected entries are never dropped; dropped as a parked state is, the donor gives its slot
  // back; TakeDonor hands the donor itself over.
  hold = SequenceState();
  const auto donors = [](std::span<const int32_t>, bool donor) { return donor; };
  EXPECT_FALSE(parked.DropOldest(nullptr, donors));
  EXPECT_EQ(parked.shared(), 1u);
  EXPECT_EQ(parked.TakeDonor(Tokens(40, 1), &got), 0);  // not a donor's match
  EXPECT_EQ(parked.TakeDonor(ctx, &got), 32);
  EXPECT_EQ(got.length, 32);
  EXPECT_EQ(parked.shared(), 0u);
  EXPECT_EQ(parked.hit_tokens(), 96u);
  got = SequenceState();
  EXPECT_EQ(slotted_->slots_free(), 2);
  Result<SequenceState> again = slotted_->CopySequence(running);
  ASSERT_TRUE(again.ok());
  parked.Share(system, std::move(again).value());
  EXPECT_TRUE(parked.DropOldest());
  EXPECT_EQ(slotted_->slots_free(), 2);
}

}  // namespace
}  // namespace deepinfer
