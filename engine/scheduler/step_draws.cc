#include "engine/scheduler/step_draws.h"

namespace deepinfer {

StepDraws::StepDraws(const Model& model, bool on_stepper)
    : model_(model), on_stepper_(on_stepper && model.samples_on_stepper()) {}

bool StepDraws::Plan(std::span<BatchItem> items, std::span<RequestState* const> sampled,
                     std::span<const size_t> sampled_items, std::vector<float>& logits) {
  bool draw = on_stepper_ && !sampled.empty();
  for (size_t k = 0; k < sampled.size() && draw; ++k) draw = sampled[k]->DrawsOnStepper();
  if (!draw) {
    const size_t vocab = static_cast<size_t>(model_.config().vocab_size);
    logits.resize(items.size() * vocab);
    for (size_t k = 0; k < items.size(); ++k) items[k].logits = &logits[k * vocab];
    return false;
  }
  // The pointers below stay valid through the step: nothing grows these vectors until the next
  // Plan.
  params_.resize(sampled.size());
  next_.resize(sampled.size());
  for (BatchItem& item : items) item.logits = nullptr;
  for (size_t k = 0; k < sampled.size(); ++k) {
    params_[k] = sampled[k]->DrawParams();
    BatchItem& item = items[sampled_items[k]];
    item.sample = &params_[k];
    item.next = &next_[k];
  }
  return true;
}

}  // namespace deepinfer
