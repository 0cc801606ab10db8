// The Model's slot path on the device forward (Model::UseSlots, engine/model/slot_stepper.h):
// what the engine runs with `deepinferd --forward slots --device cuda`. With CPU-order kernels,
// batches mixing prompt chunks (logits of their last row only) and decode rows give the plain CPU
// Model's logits bit for bit, a slot reused after its sequence ended starts empty, and a parked
// sequence continued by a later request picks up where it stopped, and a copied slot continues
// as its source would.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "engine/backend/cuda/device_forward.h"
#include "engine/cache/parked_slots.h"
#include "engine/model/model.h"
#include "kernels/cuda_available.h"
#include "tests/gpu/kernel_shaped_spec.h"
#include "tests/unit/test_util.h"

namespace deepinfer {
namespace {

// A kernel-shaped checkpoint, a Model on two device slots (CPU-order kernels, so its logits are
// the CPU's bit for bit) and the plain CPU Model to compare with.
class DeviceSlotsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
    ck_ = testing::KernelShapedCheckpoint(dir_, std::random_device{}());
    ASSERT_NE(ck_, nullptr);
    V_ = ck_->config.vocab_size;
    DeviceForwardOptions opt;
    opt.max_batch = 24;
    opt.max_chunk = 16;
    opt.slots = 2;
    opt.max_context = 128;
    opt.cpu_order = true;
    auto dev = DeviceForward::Create(*ck_, opt);
    ASSERT_TRUE(dev.ok()) << dev.status().ToString();
    dev_ = std::move(dev).value();
    on_slots_ = std::make_unique<Model>(*ck_, *cpu_, Numerics::kReference);
    plain_ = std::make_unique<Model>(*ck_, *cpu_, Numerics::kReference);
    on_slots_->UseSlots(dev_.get());
  }
  testing::TempDir dir_;
  std::unique_ptr<Checkpoint> ck_;
  std::unique_ptr<DeviceForward> dev_;
  std::unique_ptr<Backend> cpu_ = MakeCpuBackend(4);
  std::unique_ptr<Model> on_slots_, plain_;
  int64_t V_ = 0;
  std::mt19937 rng_{std::random_device{}()};
};

TEST_F(DeviceSlotsTest, TheModelOnDeviceSlotsGivesTheCpuLogits) {
  Model& on_slots = *on_slots_;
  Model& plain = *plain_;
  // Two rounds of two sequences on two slots: the second round reuses the slots the first left.
  for (int round = 0; round < 2; ++round) {
    SequenceState a = on_slots.NewSequence(), b = on_slots.NewSequence();
    SequenceState pa = plain.NewSequence(), pb = plain.NewSequence();
    for (auto [na, nb] : std::vector<std::pair<int, int>>{{16, 1}, {5, 16}, {1, 7}, {1, 1}}) {
      std::vector<int32_t> ta(na), tb(nb);
      for (auto& t : ta) t = static_cast<int32_t>(rng_() % V_);
      for (auto& t : tb) t = static_cast<int32_t>(rng_() % V_);
      std::vector<float> got(2 * V_), want(2 * V_);
      BatchItem s_items[2] = {{&a, ta, got.data(), nullptr, true},
                              {&b, tb, &got[V_], nullptr, true}};
      BatchItem p_items[2] = {{&pa, ta, want.data(), nullptr, true},
                              {&pb, tb, &want[V_], nullptr, true}};
      const Status st = on_slots.ForwardBatch(s_items);
      ASSERT_TRUE(st.ok()) << st.ToString();
      ASSERT_TRUE(plain.ForwardBatch(p_items).ok());
      EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
          << "round " << round << ", step of " << na << " + " << nb;
    }
  }
}

// Parked slots on the device (what `deepinferd --device cuda` does between a conversation's
// turns): a sequence parked after its first turn and taken over by the next continues on its
// device caches, and the next turn's logits equal the plain CPU Model's over the whole context.
TEST_F(DeviceSlotsTest, AParkedSequenceContinuesOnItsDeviceSlot) {
  Model& on_slots = *on_slots_;
  Model& plain = *plain_;
  std::vector<int32_t> turn(45);
  for (auto& t : turn) t = static_cast<int32_t>(rng_() % V_);
  ParkedSlots parked(2);
  {
    SequenceState first = on_slots.NewSequence();
    for (size_t i = 0; i < 30; i += 15) {
      ASSERT_TRUE(on_slots.Forward(first, std::span(turn).subspan(i, 15), nullptr, nullptr).ok());
    }
    parked.Park({turn.begin(), turn.begin() + 30}, std::move(first));
  }
  // Another sequence runs on the other slot meanwhile; the parked one's caches stay as they were.
  SequenceState other = on_slots.NewSequence();
  ASSERT_TRUE(on_slots.Forward(other, std::span(turn).first(9), nullptr, nullptr).ok());
  SequenceState next;
  ASSERT_EQ(parked.Take(turn, &next), 30);
  std::vector<float> got(15 * V_), want(45 * V_);
  ASSERT_TRUE(on_slots.Forward(next, std::span(turn).subspan(30), got.data(), nullptr).ok());
  SequenceState p = plain.NewSequence();
  ASSERT_TRUE(plain.Forward(p, turn, want.data(), nullptr).ok());
  EXPECT_EQ(std::memcmp(got.data(), &want[30 * V_], got.size() * sizeof(float)), 0);
}

// A copy of a device slot (CopySlot through Model::CopySequence: what the engine's donors of
// shared prefixes take) continues as its source would: after a 40-token prefix (compressed rows,
// a partial compressor window, the ring) the source and the copy take different tokens in one
// step, and each gives the plain CPU Model's logits over its whole context.
TEST_F(DeviceSlotsTest, ACopiedDeviceSlotContinuesAsItsSource) {
  Model& on_slots = *on_slots_;
  Model& plain = *plain_;
  ASSERT_TRUE(on_slots.copies_sequences());
  std::vector<int32_t> prefix(40), x(10), y(10);
  for (auto* v : {&prefix, &x, &y}) {
    for (auto& t : *v) t = static_cast<int32_t>(rng_() % V_);
  }
  SequenceState source = on_slots.NewSequence();
  for (size_t i = 0; i < prefix.size(); i += 16) {
    const size_t n = std::min<size_t>(16, prefix.size() - i);
    ASSERT_TRUE(on_slots.Forward(source, std::span(prefix).subspan(i, n), nullptr, nullptr).ok());
  }
  Result<SequenceState> copy = on_slots.CopySequence(source);
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  EXPECT_EQ(copy->length, 40);
  EXPECT_EQ(dev_->length(copy->slot.slot()), 40);
  EXPECT_EQ(dev_->CopySlot(0, 0).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(dev_->CopySlot(0, 2).code(), ErrorCode::kInvalidArgument);
  std::vector<float> got(20 * V_), want(50 * V_);
  BatchItem items[2] = {{&source, x, got.data(), nullptr, false},
                        {&copy.value(), y, &got[10 * V_], nullptr, false}};
  const Status st = on_slots.ForwardBatch(items);
  ASSERT_TRUE(st.ok()) << st.ToString();
  for (int k = 0; k < 2; ++k) {
    std::vector<int32_t> all = prefix;
    const std::vector<int32_t>& tail = k == 0 ? x : y;
    all.insert(all.end(), tail.begin(), tail.end());
    SequenceState p = plain.NewSequence();
    ASSERT_TRUE(plain.Forward(p, all, want.data(), nullptr).ok());
    EXPECT_EQ(std::memcmp(&got[k * 10 * V_], &want[40 * V_], 10 * V_ * sizeof(float)), 0)
        << (k == 0 ? "the source" : "the copy");
  }
}

}  // namespace
}  // namespace deepinfer
