#include "engine/model/slot_stepper.h"

#include <algorithm>
#include <utility>

namespace deepinfer {

Status CheckStepRows(std::span<const int32_t> slots, std::span<const int32_t> tokens,
                     const int64_t* lengths, const StepLimits& lim, std::vector<uint8_t>& seen) {
  const int rows = static_cast<int>(slots.size());
  if (slots.size() != tokens.size()) return InvalidArgument("one token per row");
  if (rows > lim.max_rows) {
    return InvalidArgument("a step of " + std::to_string(rows) + " rows; at most " +
                           std::to_string(lim.max_rows) + " rows a step");
  }
  Status st = Status::Ok();
  int64_t run = 0;
  for (int i = 0; i < rows && st.ok(); ++i) {
    const int s = slots[i];
    const bool continues = i > 0 && slots[i - 1] == s;
    run = continues ? run + 1 : 1;
    if (!continues && (s < 0 || s >= lim.slots || seen[s])) {
      st = InvalidArgument("bad slot, or a slot's rows not consecutive");
    } else if (run > lim.max_chunk) {
      st = InvalidArgument("more than max_chunk (" + std::to_string(lim.max_chunk) +
                           ") rows of slot " + std::to_string(s));
    } else if (tokens[i] < 0 || tokens[i] >= lim.vocab) {
      st = InvalidArgument("token id " + std::to_string(tokens[i]) + " out of range");
    } else if (lengths[s] + run > lim.max_context) {
      st = InvalidArgument("the sequence in slot " + std::to_string(s) + " is full");
    } else {
      seen[s] = 1;
    }
  }
  for (int i = 0; i < rows; ++i) {
    if (slots[i] >= 0 && slots[i] < lim.slots) seen[slots[i]] = 0;
  }
  return st;
}

Status CheckLogitRows(std::span<const int32_t> logit_rows, int64_t rows) {
  for (size_t k = 0; k < logit_rows.size(); ++k) {
    if (logit_rows[k] < 0 || logit_rows[k] >= rows ||
        (k > 0 && logit_rows[k] <= logit_rows[k - 1])) {
      return InvalidArgument("logit rows must be rows of the step, ascending, each once");
    }
  }
  return Status::Ok();
}

Status CheckSampleParams(std::span<const SampleParams> params, int64_t rows,
                         const uint32_t* bitmask, int32_t vocab) {
  if (static_cast<int64_t>(params.size()) != rows) {
    return InvalidArgument("one sampling config per sampled row");
  }
  for (const SampleParams& p : params) {
    if (!(p.top_p > 0.0f && p.top_p <= 1.0f) || !(p.min_p >= 0.0f && p.min_p <= 1.0f)) {
      return InvalidArgument("top_p must be in (0, 1], min_p in [0, 1]");
    }
  }
  if (bitmask == nullptr) return Status::Ok();
  const int64_t words = (vocab + 31) / 32;
  for (int64_t r = 0; r < rows; ++r) {
    const uint32_t* row = bitmask + r * words;
    bool any = false;
    for (int64_t w = 0; w < words && !any; ++w) {
      const int32_t valid = std::min<int32_t>(32, vocab - static_cast<int32_t>(w * 32));
      const uint32_t bits = valid == 32 ? ~0u : (1u << valid) - 1;
      any = (row[w] & bits) != 0;
    }
    if (!any) return InvalidArgument("a sampled row's mask allows no token");
  }
  return Status::Ok();
}

Status MergeStepRows(std::span<const int32_t> sample_rows, std::span<const int32_t> logit_rows,
                     int64_t rows, std::vector<int32_t>& merged, std::vector<uint8_t>& drawn) {
  merged.clear();
  drawn.clear();
  DI_RETURN_IF_ERROR(CheckLogitRows(sample_rows, rows));
  DI_RETURN_IF_ERROR(CheckLogitRows(logit_rows, rows));
  if (sample_rows.empty() && logit_rows.empty()) {
    for (int32_t r = 0; r < rows; ++r) merged.push_back(r);
    drawn.assign(merged.size(), 1);
    return Status::Ok();
  }
  size_t a = 0, b = 0;
  while (a < sample_rows.size() || b < logit_rows.size()) {
    const bool take_sample =
        b == logit_rows.size() || (a < sample_rows.size() && sample_rows[a] < logit_rows[b]);
    merged.push_back(take_sample ? sample_rows[a++] : logit_rows[b++]);
    drawn.push_back(take_sample ? 1 : 0);
  }
  return CheckLogitRows(merged, rows);  // a row in both lists appears twice
}

SlotPool::SlotPool(int slots) {
  for (int s = slots - 1; s >= 0; --s) free_.push_back(s);  // slot 0 is taken first
}

int SlotPool::Take() {
  std::lock_guard<std::mutex> lock(mu_);
  if (free_.empty()) return -1;
  const int s = free_.back();
  free_.pop_back();
  return s;
}

void SlotPool::Give(int slot) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(slot);
}

int SlotPool::free_slots() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(free_.size());
}

SlotLease& SlotLease::operator=(const SlotLease& other) {
  if (this != &other) {
    Release();
    copied_ = other.slot_ >= 0 || other.copied_;
  }
  return *this;
}

SlotLease::SlotLease(SlotLease&& other) noexcept
    : pool_(std::move(other.pool_)),
      slot_(std::exchange(other.slot_, -1)),
      copied_(std::exchange(other.copied_, false)) {}

SlotLease& SlotLease::operator=(SlotLease&& other) noexcept {
  if (this != &other) {
    Release();
    pool_ = std::move(other.pool_);
    slot_ = std::exchange(other.slot_, -1);
    copied_ = std::exchange(other.copied_, false);
  }
  return *this;
}

void SlotLease::Release() {
  if (pool_ && slot_ >= 0) pool_->Give(slot_);
  pool_.reset();
  slot_ = -1;
}

}  // namespace deepinfer
