#include "engine/scheduler/step_draws.h"

namespace deepinfer {

StepDraws::StepDraws(const Model& model, bool on_stepper)
    : model_(model), on_stepper_(on_stepper && model.samples_on_stepper()) {}

size_t StepDraws::Plan(std::span<BatchItem> items, std::span<RequestState* const> sampled,
                       std::span<const size_t> sampled_items, std::vector<float>& logits,
                       ThreadPool* pool) {
  const size_t n = sampled.size(), vocab = static_cast<size_t>(model_.config().vocab_size);
  // Nothing below grows after the pointers into it are taken, so they hold through the step.
  drawn_.resize(n);
  params_.resize(n);
  next_.resize(n);
  logprobs_.resize(n);
  logits_.assign(n, nullptr);
  // A grammar's mask is made now, before the step, where the host path makes it during the
  // step (the engine's overlap): a mask costs ~14 us at its p50 against the host draw's
  // vocabulary-wide copy and pick it saves (docs/architecture.md, "Draws on the stepper").
  // Several are made on the pool: each request's matcher is its own, the grammar and the mask
  // cache are shared read-only or locked, as for the host draws made there.
  const size_t words = (vocab + 31) / 32;
  masks_.resize(n * words);
  masked_.clear();
  for (size_t k = 0; k < n; ++k) {
    const RequestState& state = *sampled[k];
    drawn_[k] = on_stepper_ && state.DrawsOnStepper();
    if (drawn_[k] && state.constrained()) masked_.push_back(k);
  }
  const auto make_masks = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const size_t k = masked_[static_cast<size_t>(i)];
      // No token the grammar allows: the host path reports it (RequestState::Sample).
      drawn_[k] = sampled[k]->DrawMask(&masks_[k * words], static_cast<int32_t>(vocab));
    }
  };
  const auto masked = static_cast<int64_t>(masked_.size());
  if (pool != nullptr && masked > 1) {
    pool->ParallelFor(masked, make_masks);
  } else {
    make_masks(0, masked);
  }
  size_t draws = 0;
  for (size_t k = 0; k < n; ++k) draws += drawn_[k];
  logits.resize((n - draws) * vocab);
  for (BatchItem& item : items) item.logits = nullptr;
  for (size_t k = 0, row = 0; k < n; ++k) {
    BatchItem& item = items[sampled_items[k]];
    if (drawn_[k]) {
      params_[k] = sampled[k]->DrawParams();
      item.sample = &params_[k];
      item.next = &next_[k];
      item.logprob = &logprobs_[k];
      item.mask = sampled[k]->constrained() ? &masks_[k * words] : nullptr;
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
