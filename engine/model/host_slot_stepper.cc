#include "engine/model/host_slot_stepper.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "engine/sampling/sampler.h"

namespace deepinfer {

HostSlotStepper::HostSlotStepper(Model& model, int slots, int max_rows, int max_chunk,
                                 int64_t max_context)
    : model_(model),
      limits_{slots, max_rows, max_chunk, max_context, model.config().vocab_size},
      lengths_(slots, 0),
      seen_(slots, 0) {
  states_.reserve(slots);
  for (int s = 0; s < slots; ++s) states_.push_back(model_.NewSequence());
  items_.reserve(max_rows);
  all_logits_.resize(static_cast<size_t>(max_rows) * model.config().vocab_size);
  mixed_logits_.resize(all_logits_.size());
  mixed_rows_.reserve(max_rows);
  mixed_drawn_.reserve(max_rows);
}

Status HostSlotStepper::fault() const {
  return faulted_.load(std::memory_order_acquire) ? fault_ : Status::Ok();
}

Status HostSlotStepper::ResetSlot(int slot) {
  if (faulted_.load(std::memory_order_acquire)) return fault_;
  if (slot < 0 || slot >= slots()) return InvalidArgument("slot out of range");
  states_[slot] = model_.NewSequence();
  lengths_[slot] = 0;
  return Status::Ok();
}

Status HostSlotStepper::CopySlot(int from, int to) {
  if (faulted_.load(std::memory_order_acquire)) return fault_;
  if (from < 0 || from >= slots() || to < 0 || to >= slots()) {
    return InvalidArgument("slot out of range");
  }
  if (from == to) return InvalidArgument("a slot copied onto itself");
  states_[to] = states_[from];  // the compressed rows' blocks are shared, copied on write
  lengths_[to] = lengths_[from];
  return Status::Ok();
}

int64_t HostSlotStepper::length(int slot) const {
  return slot >= 0 && slot < slots() ? lengths_[slot] : -1;
}

Status HostSlotStepper::Step(std::span<const int32_t> slots, std::span<const int32_t> tokens,
                             std::span<const int32_t> logit_rows, float* logits) {
  if (faulted_.load(std::memory_order_acquire)) return fault_;
  DI_RETURN_IF_ERROR(CheckStepRows(slots, tokens, lengths_.data(), limits_, seen_));
  DI_RETURN_IF_ERROR(CheckLogitRows(logit_rows, static_cast<int64_t>(slots.size())));
  if (steps_until_fault_ == 0) {
    fault_ = Internal("slot stepper stopped: injected fault (HostSlotStepper::FailAfter)");
    faulted_.store(true, std::memory_order_release);  // fault_ is final from here on
    return fault_;
  }
  if (steps_until_fault_ > 0) --steps_until_fault_;
  const int64_t V = model_.config().vocab_size;
  items_.clear();
  size_t asked = 0;  // the next asked row
  for (size_t i = 0; i < slots.size();) {
    size_t end = i + 1;
    while (end < slots.size() && slots[end] == slots[i]) ++end;
    // A run whose asked rows are at most its last (a chunk's usual case) pays the head once.
    bool inner = false;
    for (; asked < logit_rows.size() && static_cast<size_t>(logit_rows[asked]) < end; ++asked) {
      inner = inner || static_cast<size_t>(logit_rows[asked]) != end - 1;
    }
    const bool last_only = !logit_rows.empty() && !inner;
    float* dst = logit_rows.empty() ? logits + static_cast<int64_t>(i) * V
                                    : all_logits_.data() + (last_only ? end - 1 : i) * V;
    items_.push_back({&states_[slots[i]], tokens.subspan(i, end - i), dst, nullptr, last_only});
    i = end;
  }
  DI_RETURN_IF_ERROR(model_.ForwardBatch(items_));
  for (size_t k = 0; k < logit_rows.size(); ++k) {
    std::copy_n(&all_logits_[logit_rows[k] * V], V, logits + static_cast<int64_t>(k) * V);
  }
  for (int32_t s : slots) ++lengths_[s];
  return Status::Ok();
}

Status HostSlotStepper::StepMixed(std::span<const int32_t> slots, std::span<const int32_t> tokens,
                                  std::span<const int32_t> sample_rows,
                                  std::span<const SampleParams> params, const uint32_t* bitmask,
                                  int32_t* next, float* logprobs,
                                  std::span<const int32_t> logit_rows, float* logits) {
  DI_RETURN_IF_ERROR(MergeStepRows(sample_rows, logit_rows, static_cast<int64_t>(slots.size()),
                                   mixed_rows_, mixed_drawn_));
  const int32_t V = model_.config().vocab_size;
  const int64_t draws = static_cast<int64_t>(mixed_rows_.size() - logit_rows.size());
  const int64_t most = std::min<int64_t>(limits_.max_rows, this->slots());
  if (draws > most)
    return InvalidArgument("a step draws at most " + std::to_string(most) + " rows");
  DI_RETURN_IF_ERROR(CheckSampleParams(params, draws, bitmask, V));
  DI_RETURN_IF_ERROR(Step(slots, tokens, mixed_rows_, mixed_logits_.data()));
  const int64_t words = (V + 31) / 32;
  int64_t k = 0, l = 0;  // the next draw, the next logit row
  for (size_t j = 0; j < mixed_rows_.size(); ++j) {
    float* row = &mixed_logits_[j * V];
    if (!mixed_drawn_[j]) {
      std::copy_n(row, V, logits + l++ * V);
      continue;
    }
    if (bitmask != nullptr) {
      const uint32_t* mask = bitmask + k * words;
      for (int32_t t = 0; t < V; ++t) {
        if (!((mask[t >> 5] >> (t & 31)) & 1u)) row[t] = -INFINITY;
      }
    }
    next[k] = SampleToken(row, V, params[k], sample_scratch_);
    if (logprobs != nullptr) {
      TokenLogprobs lp;
      if (params[k].logprob) ComputeLogprobs(row, V, next[k], 0, &lp);
      logprobs[k] = lp.chosen;  // 0 when not asked
    }
    ++k;
  }
  return Status::Ok();
}

}  // namespace deepinfer
