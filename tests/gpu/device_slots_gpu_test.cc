// The Model's slot path on the device forward (Model::UseSlots, engine/model/slot_stepper.h):
// what the engine runs with `deepinferd --forward slots --device cuda`. With CPU-order kernels,
// batches mixing prompt chunks (logits of their last row only) and decode rows give the plain CPU
// Model's logits bit for bit, a slot reused after its sequence ended starts empty, and a parked
// sequence continued by a later request picks up where it stopped.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace deepinfer
