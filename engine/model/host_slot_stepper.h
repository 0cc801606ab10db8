// The slot contract (engine/model/slot_stepper.h) on the host Model: each slot a SequenceState of
// a plain Model, a step one ForwardBatch of its runs. The CPU reference of the device forward's
// contract — what the Model's slot path and the engine run on in tests without a GPU, with the
// CPU forward's logits exactly.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/model/model.h"
#include "engine/model/slot_stepper.h"

namespace deepinfer {

/// The slot contract on a plain Model, slot by slot a SequenceState (see the file comment).
class HostSlotStepper : public SlotStepper {
 public:
  /// `model` must not itself run on slots (its ForwardBatch would come back here) and outlives
  /// the stepper.
  HostSlotStepper(Model& model, int slots, int max_rows, int max_chunk, int64_t max_context);

  int slots() const override { return static_cast<int>(states_.size()); }
  int max_rows() const override { return limits_.max_rows; }
  int max_chunk() const override { return limits_.max_chunk; }
  int64_t max_context() const override { return limits_.max_context; }
  Status ResetSlot(int slot) override;
  int64_t length(int slot) const override;
  using SlotStepper::Step;
  Status Step(std::span<const int32_t> slots, std::span<const int32_t> tokens,
              std::span<const int32_t> logit_rows, float* logits) override;
  /// Draws with SampleToken on the host from Step's logits: the device forward's StepMixed,
  /// pick for pick.
  bool SamplesRows() const override { return true; }
  Status StepMixed(std::span<const int32_t> slots, std::span<const int32_t> tokens,
                   std::span<const int32_t> sample_rows, std::span<const SampleParams> params,
                   const uint32_t* bitmask, int32_t* next, float* logprobs,
                   std::span<const int32_t> logit_rows, float* logits) override;
  Status fault() const override;
  bool CopiesSlots() const override { return true; }
  Status CopySlot(int from, int to) override;

  /// Testing hook: after `steps` more valid steps, the next one fails as a device fault does on
  /// the device forward — it and every later Step and ResetSlot return the fault, which fault()
  /// reports — so the daemon's fault path runs without a GPU (deepinferd reads it from
  /// DEEPINFER_FAULT_AFTER_STEPS, docs/configuration.md). steps < 0: never.
  void FailAfter(int64_t steps) { steps_until_fault_ = steps; }

 private:
  int64_t steps_until_fault_ = -1;
  Status fault_ = Status::Ok();       // set by the injected fault
  std::atomic<bool> faulted_{false};  // fault_ is set (any thread may read it then)
  Model& model_;
  StepLimits limits_;
  std::vector<SequenceState> states_;
  std::vector<int64_t> lengths_;
  std::vector<uint8_t> seen_;
  std::vector<BatchItem> items_;
  std::vector<float> all_logits_;    // every row's, for a step that wants some
  std::vector<float> mixed_logits_;  // StepMixed's rows, the drawn ones masked in place
  std::vector<int32_t> mixed_rows_, sample_scratch_;
  std::vector<uint8_t> mixed_drawn_;
};

}  // namespace deepinfer
