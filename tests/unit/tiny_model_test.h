// A test fixture with the default tiny checkpoint loaded, a 2-thread CPU backend, token sequences
// made from it and, on request, a Model on the slot path over the CPU reference stepper — for the
// slot-path tests that compare models over the same weights.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/model/host_slot_stepper.h"
#include "engine/model/model.h"
#include "engine/model/tiny_checkpoint.h"
#include "engine/model/weights.h"
#include "tests/unit/test_util.h"

namespace deepinfer::testing {

class TinyModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(MakeTinyCheckpoint(TinySpec{}, dir_.path()).ok());
    auto ck = LoadCheckpoint(dir_.path());
    ASSERT_TRUE(ck.ok()) << ck.status().ToString();
    ck_ = std::move(ck).value();
    V_ = ck_->config.vocab_size;
  }
  /// n token ids in the vocabulary; `salt` makes different sequences.
  std::vector<int32_t> Tokens(int n, int salt) const {
    std::vector<int32_t> t(n);
    for (int i = 0; i < n; ++i) t[i] = static_cast<int32_t>((i * 7919 + 13 + salt * 101) % V_);
    return t;
  }
  /// slotted_: a reference-numerics Model on the slot path, over stepper_'s slots of inner_.
  void MakeSlotted(int slots, int max_rows, int max_chunk, int64_t max_context) {
    inner_ = std::make_unique<Model>(*ck_, *cpu_, Numerics::kReference);
    slotted_ = std::make_unique<Model>(*ck_, *cpu_, Numerics::kReference);
    stepper_ = std::make_unique<HostSlotStepper>(*inner_, slots, max_rows, max_chunk, max_context);
    slotted_->UseSlots(stepper_.get());
  }
  TempDir dir_;
  std::unique_ptr<Checkpoint> ck_;
  int64_t V_ = 0;
  std::unique_ptr<Backend> cpu_ = MakeCpuBackend(2);
  std::unique_ptr<Model> inner_, slotted_;
  std::unique_ptr<HostSlotStepper> stepper_;
};

}  // namespace deepinfer::testing
