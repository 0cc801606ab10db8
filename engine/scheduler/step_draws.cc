#include "engine/scheduler/step_draws.h"

namespace deepinfer {

StepDraws::StepDraws(const Model& model, bool on_stepper)
    : model_(model), on_stepper_(on_stepper && model.samples_on_stepper()) {}

size_t StepDraws::Plan(std::span<BatchItem> items, std::span<RequestState* const> sampled,
                       std::span<const size_t> sampled_items, std::vector<float>& logits) {
  const size_t n = sampled.size(), vocab = static_cast<size_t>(model_.config().vocab_size);
  // Nothing below grows after the pointers into it are taken, so they hold through the step.
  drawn_.resize(n);
  params_.resize(n);
  next_.resize(n);
  logprobs_.resize(n);
  logits_.assign(n, nullptr);
  size_t draws = 0;
  for (size_t k = 0; k < n; ++k) {
    drawn_[k] = on_stepper_ && sampled[k]->DrawsOnStepper();
    draws += drawn_[k];
  }
  logits.resize((n - draws) * vocab);
  for (BatchItem& item : items) item.logits = nullptr;
  for (size_t k = 0, row = 0; k < n; ++k) {
    BatchItem& item = items[sampled_items[k]];
    if (drawn_[k]) {
      params_[k] = sampled[k]->DrawParams();
      item.sample = &params_[k];
      item.next = &next_[k];
      item.logprob = &logprobs_[k];
    } else {
      logits_[k] = &logits[row++ * vocab];
      item.logits = logits_[k];
    }
  }
  return draws;
}

Status StepDraws::Accept(size_t k, RequestState& state) {
  Status st = state.Accept(next_[k], logprobs_[k]);
  if (st.ok()) accepted_.fetch_add(1, std::memory_order_relaxed);
  return st;
}

}  // namespace deepinfer
