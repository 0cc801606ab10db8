// Where a step's tokens are drawn. On the slot path the stepper can sample (the device forward's
// StepSample, or its CPU reference): then the logits never leave it and the step's only copy back
// is one token per sampled request, instead of a vocabulary-wide row each plus a host draw
// (~3.3 ms at V4's 129K ids for a temperature pick, bench/RESULTS.md). A step draws there when
// every request sampled in it can be (RequestState::DrawsOnStepper); one that needs the host —
// logit processors, log-probabilities, a grammar — takes the whole step's logits, as before.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/model/model.h"
#include "engine/scheduler/generator.h"

namespace deepinfer {

/// A step's draws: on the stepper or from logits on the host (see the file comment).
class StepDraws {
 public:
  /// `on_stepper`: whether steps may draw on the stepper at all (the model must sample there
  /// too, Model::samples_on_stepper).
  StepDraws(const Model& model, bool on_stepper);

  /// Prepares a step's items. `sampled` are the requests that draw a token after this step,
  /// their items at items[sampled_items[k]]. On the stepper, those items ask for their draws
  /// (BatchItem::sample) and no item takes logits; else item k's logits go to row k of `logits`,
  /// resized to hold them. Returns whether the step draws on the stepper.
  bool Plan(std::span<BatchItem> items, std::span<RequestState* const> sampled,
            std::span<const size_t> sampled_items, std::vector<float>& logits);
  /// After a step that drew on the stepper: the token of sampled[k].
  int32_t token(size_t k) const { return next_[k]; }

 private:
  const Model& model_;
  const bool on_stepper_;
  std::vector<SampleParams> params_;
  std::vector<int32_t> next_;
};

}  // namespace deepinfer
