// Where a step's tokens are drawn. On the slot path the stepper can sample (the device forward's
// StepMixed, or its CPU reference): a request drawn there gets one token id back instead of a
// vocabulary-wide row of logits and a host draw (~3.3 ms at V4's 129K ids for a temperature
// pick on one core, bench/RESULTS.md). Each request sampled in a step is drawn there when it can
// be (RequestState::DrawsOnStepper), with its log-probability when it asks and its grammar's mask
// when it has one; one that needs the host — logit processors — takes its logits in the same
// step.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/common/thread_pool.h"
#include "engine/model/model.h"
#include "engine/scheduler/generator.h"

namespace deepinfer {

/// A step's draws: on the stepper or from logits on the host (see the file comment).
class StepDraws {
 public:
  /// `on_stepper`: whether requests may draw on the stepper at all (the model must sample there
  /// too, Model::samples_on_stepper).
  StepDraws(const Model& model, bool on_stepper);

  /// Prepares a step's items. `sampled` are the requests that draw a token after this step,
  /// their items at items[sampled_items[k]]. Those that can draw on the stepper ask for it
  /// (BatchItem::sample); the others' items take their logits into rows of `logits` (resized to
  /// hold them); items that sample nothing take neither. Returns how many draw on the stepper.
  /// With `pool` the grammars' masks of two or more constrained draws are made on it, each
  /// request's on one thread (as its host draw would be); without, on the calling thread.
  size_t Plan(std::span<BatchItem> items, std::span<RequestState* const> sampled,
              std::span<const size_t> sampled_items, std::vector<float>& logits,
              ThreadPool* pool = nullptr);
  /// After the step: whether sampled[k] was drawn on the stepper; then its token, else its
  /// logits (the row Plan gave its item).
  bool drawn(size_t k) const { return drawn_[k] != 0; }
  /// sampled[k]'s Accept of its drawn token (any thread), counted when it succeeds.
  Status Accept(size_t k, RequestState& state);
  /// Drawn tokens accepted since the last call.
  uint64_t TakeAccepted() { return accepted_.exchange(0, std::memory_order_relaxed); }
  int32_t token(size_t k) const { return next_[k]; }
  float logprob(size_t k) const { return logprobs_[k]; }  // when the request asked for them
  float* logits(size_t k) const { return logits_[k]; }

 private:
  const Model& model_;
  const bool on_stepper_;
  std::vector<uint8_t> drawn_;
  std::vector<SampleParams> params_;
  std::vector<int32_t> next_;
  std::vector<float> logprobs_;
  std::vector<float*> logits_;
  std::vector<uint32_t> masks_;  // a constrained draw's mask, ceil(vocab / 32) words each
  std::vector<size_t> masked_;   // the step's constrained draws (indices into sampled)
  std::atomic<uint64_t> accepted_{0};
};

}  // namespace deepinfer
