// The slot path's prefix reuse (engine/cache/slot_reuse.h) on the CPU reference stepper: a
// prompt's second sighting of a shared prefix plans a donor there, the donor is left only at
// exactly that length and only into a free slot, later requests start from copies of it (a
// parked slot giving way for the copy) with the forward's logits from scratch, and nothing of
// this happens where slots cannot be copied or sharing is off.
#include "engine/cache/slot_reuse.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "engine/model/host_slot_stepper.h"
#include "tests/unit/tiny_model_test.h"

namespace deepinfer {
namespace {

class SlotReuseTest : public testing::TinyModelTest {
 protected:
  void SetUp() override {
    TinyModelTest::SetUp();
    if (!HasFatalFailure()) MakeSlotted(3, 128, 128, 512);
  }
  // A prompt of the shared 150-token system part and `own` tokens of its own.
  std::vector<int32_t> Prompt(int own, int salt) const {
    std::vector<int32_t> p = Tokens(150, 1);
    const std::vector<int32_t> rest = Tokens(own, salt);
    p.insert(p.end(), rest.begin(), rest.end());
    return p;
  }
  // Feeds `tokens` from seq's length on in chunks of at most 64, calling reuse.Stepped after
  // each, and stopping a chunk at share_at as the engine does.
  void Feed(SlotReuse& reuse, std::span<const int32_t> ctx, SequenceState& seq, int64_t share_at,
            float* last_logits) {
    while (seq.length < static_cast<int64_t>(ctx.size())) {
      int64_t n = std::min<int64_t>(64, static_cast<int64_t>(ctx.size()) - seq.length);
      if (share_at > seq.length && share_at < seq.length + n) n = share_at - seq.length;
      std::vector<float> logits(n * V_);
      ASSERT_TRUE(slotted_->Forward(seq, ctx.subspan(seq.length, n), logits.data(), nullptr).ok());
      reuse.Stepped(ctx, seq, share_at, nullptr);
      std::memcpy(last_logits, &logits[(n - 1) * V_], V_ * sizeof(float));
    }
  }
  std::vector<float> FromScratch(std::span<const int32_t> ctx) {
    Model plain(*ck_, *cpu_, Numerics::kReference);
    SequenceState p = plain.NewSequence();
    std::vector<float> all(ctx.size() * V_);
    EXPECT_TRUE(plain.Forward(p, ctx, all.data(), nullptr).ok());
    return {all.end() - V_, all.end()};
  }
};

TEST_F(SlotReuseTest, TheSecondSightingLeavesADonorAndLaterRequestsStartFromIt) {
  SlotReuse reuse(*slotted_, {});
  ASSERT_TRUE(reuse.sharing());
  const auto none = [](std::span<const int32_t>) { return false; };
  std::vector<float> last(V_);
  // First request: nothing seen before, so no share point; it ends parked.
  const std::vector<int32_t> a = Prompt(20, 2);
  SequenceState sa;
  int64_t share_at = -1;
  EXPECT_EQ(reuse.Start(a, none, &sa, &share_at), 0);
  EXPECT_EQ(share_at, 0);
  Feed(reuse, a, sa, share_at, last.data());
  reuse.Park({a.begin(), a.end()}, std::move(sa));
  // Second: shares the 128-token boundary with the first, so it plans a donor there.
  const std::vector<int32_t> b = Prompt(30, 3);
  SequenceState sb;
  EXPECT_EQ(reuse.Start(b, none, &sb, &share_at), 0);
  EXPECT_EQ(share_at, 128);
  reuse.Stepped(b, sb, share_at, none);  // length 0: not there yet
  EXPECT_EQ(reuse.donors(), 0u);
  Feed(reuse, b, sb, share_at, last.data());
  EXPECT_EQ(reuse.donors(), 1u);
  EXPECT_EQ(slotted_->slots_free(), 0);  // a's parked slot, b's, the donor's
  EXPECT_EQ(std::memcmp(last.data(), FromScratch(b).data(), V_ * sizeof(float)), 0);
  reuse.Park({b.begin(), b.end()}, std::move(sb));
  // Third and fourth: each starts from a copy of the donor, the slot parked longest ago giving
  // way, and needs no donor of its own.
  for (int salt : {4, 5}) {
    const std::vector<int32_t> c = Prompt(25 + salt, salt);
    SequenceState sc;
    EXPECT_EQ(reuse.Start(c, none, &sc, &share_at), 128);
    EXPECT_EQ(share_at, 0);
    EXPECT_EQ(sc.length, 128);
    Feed(reuse, c, sc, share_at, last.data());
    EXPECT_EQ(std::memcmp(last.data(), FromScratch(c).data(), V_ * sizeof(float)), 0) << salt;
    reuse.Park({c.begin(), c.end()}, std::move(sc));
    EXPECT_EQ(reuse.donors(), 1u);
    EXPECT_EQ(reuse.parked(), 2u);
  }
  EXPECT_EQ(reuse.hit_tokens(), 256u);
}

TEST_F(SlotReuseTest, ADonorNeedsAFreeSlotAndTheExactLength) {
  SlotReuse reuse(*slotted_, {});
  const auto none = [](std::span<const int32_t>) { return false; };
  const std::vector<int32_t> a = Prompt(20, 2), b = Prompt(30, 3);
  SequenceState sa, sb;
  int64_t share_at = 0;
  EXPECT_EQ(reuse.Start(a, none, &sa, &share_at), 0);
  EXPECT_EQ(reuse.Start(b, none, &sb, &share_at), 0);
  ASSERT_EQ(share_at, 128);
  // Past the share point in one chunk: no donor (its state there never existed).
  ASSERT_TRUE(slotted_->Forward(sb, std::span(b).first(100), nullptr, nullptr).ok());
  reuse.Stepped(b, sb, share_at, none);
  ASSERT_TRUE(slotted_->Forward(sb, std::span(b).subspan(100, 40), nullptr, nullptr).ok());
  reuse.Stepped(b, sb, share_at, none);
  EXPECT_EQ(reuse.donors(), 0u);
  // Exactly there, but every slot leased: no donor either.
  const std::vector<int32_t> c = Prompt(30, 4);
  SequenceState sc;
  EXPECT_EQ(reuse.Start(c, none, &sc, &share_at), 0);
  ASSERT_EQ(share_at, 128);
  EXPECT_EQ(slotted_->slots_free(), 0);
  ASSERT_TRUE(slotted_->Forward(sc, std::span(c).first(128), nullptr, nullptr).ok());
  reuse.Stepped(c, sc, share_at, none);
  EXPECT_EQ(reuse.donors(), 0u);
  sa = SequenceState();  // a slot comes free
  reuse.Stepped(c, sc, share_at, none);
  EXPECT_EQ(reuse.donors(), 1u);
}

// With every slot held, a donor takes the slot of the parked state left longest ago (never a
// donor's), and a request whose copy finds no slot at all takes the donor itself — exactly too.
// A request about to start waits for a donor only while one is ahead: not there yet, longer than
// what it could start from, and makeable.
TEST_F(SlotReuseTest, AFullSetOfSlotsStillSharesThePrefix) {
  SlotReuse reuse(*slotted_, {});
  const auto none = [](std::span<const int32_t>) { return false; };
  std::vector<float> last(V_);
  const std::vector<int32_t> a = Prompt(20, 2), b = Prompt(30, 3), c = Prompt(40, 4);
  SequenceState sa, sb, hold = slotted_->NewSequence();
  int64_t share_at = 0;
  EXPECT_EQ(reuse.Start(a, none, &sa, &share_at), 0);
  Feed(reuse, a, sa, share_at, last.data());
  reuse.Park({a.begin(), a.end()}, std::move(sa));  // a's slot stays parked
  EXPECT_EQ(reuse.Start(b, none, &sb, &share_at), 0);
  ASSERT_EQ(share_at, 128);
  EXPECT_EQ(slotted_->slots_free(), 0);
  EXPECT_TRUE(reuse.DonorAhead(c, b, 0, share_at));                   // a parked slot can give way
  EXPECT_FALSE(reuse.DonorAhead(c, b, 128, share_at));                // b is past it
  EXPECT_FALSE(reuse.DonorAhead(Prompt(40, 4), Prompt(0, 9), 0, 0));  // no donor planned
  std::vector<int32_t> diverging = c;
  diverging[5] += 1;
  EXPECT_FALSE(reuse.DonorAhead(diverging, b, 0, share_at));  // does not share it
  Feed(reuse, b, sb, share_at, last.data());
  EXPECT_EQ(reuse.donors(), 1u);
  EXPECT_EQ(reuse.parked(), 0u);                      // a's slot went to the donor
  EXPECT_FALSE(reuse.DonorAhead(c, b, 0, share_at));  // the donor is there
  // c: b, the donor and `hold` hold every slot, and only the matched donor could give way.
  SequenceState sc;
  EXPECT_EQ(reuse.Start(c, none, &sc, &share_at), 128);
  EXPECT_EQ(reuse.donors(), 0u);
  Feed(reuse, c, sc, share_at, last.data());
  EXPECT_EQ(std::memcmp(last.data(), FromScratch(c).data(), V_ * sizeof(float)), 0);
  EXPECT_EQ(reuse.hit_tokens(), 128u);
}

TEST_F(SlotReuseTest, NoDonorsWhereSlotsCannotBeCopiedOrSharingIsOff) {
  SlotReuse off(*slotted_, {true, false});
  EXPECT_FALSE(off.sharing());
  Model plain(*ck_, *cpu_, Numerics::kReference);  // not on slots: nothing copies
  SlotReuse none(plain, {});
  EXPECT_FALSE(none.sharing());
  EXPECT_FALSE(none.parking());
  SlotReuse unparked(*slotted_, {false, true});
  EXPECT_FALSE(unparked.sharing());
  const auto nobody = [](std::span<const int32_t>) { return false; };
  for (int salt : {2, 3}) {
    SequenceState s;
    int64_t share_at = -1;
    EXPECT_EQ(off.Start(Prompt(20, salt), nobody, &s, &share_at), 0);
    EXPECT_EQ(share_at, 0);
    EXPECT_GE(s.slot.slot(), 0);  // a fresh slot
  }
}

}  // namespace
}  // namespace deepinfer
