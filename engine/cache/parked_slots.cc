#include "engine/cache/parked_slots.h"

#include <algorithm>

namespace deepinfer {

void ParkedSlots::Park(std::vector<int32_t> tokens, SequenceState state) {
  if (capacity_ == 0 || tokens.empty() || state.slot.slot() < 0) return;
  if (entries_.size() == capacity_) DropOldest();
  entries_.push_back({std::move(tokens), std::move(state)});
}

void ParkedSlots::Share(std::vector<int32_t> tokens, SequenceState state) {
  if (capacity_ == 0 || tokens.empty() || state.slot.slot() < 0 || Shares(tokens)) return;
  if (entries_.size() == capacity_) DropOldest();
  entries_.push_back({std::move(tokens), std::move(state), true});
}

bool ParkedSlots::Shares(std::span<const int32_t> tokens) const {
  for (const Entry& e : entries_) {
    if (e.shared && std::equal(e.tokens.begin(), e.tokens.end(), tokens.begin(), tokens.end())) {
      return true;
    }
  }
  return false;
}

size_t ParkedSlots::shared() const {
  return static_cast<size_t>(
      std::count_if(entries_.begin(), entries_.end(), [](const Entry& e) { return e.shared; }));
}

size_t ParkedSlots::Best(std::span<const int32_t> context, bool with_donors) const {
  size_t best = entries_.size();
  for (size_t i = 0; i < entries_.size(); ++i) {
    const std::vector<int32_t>& key = entries_[i].tokens;
    if (key.size() >= context.size() || (entries_[i].shared && !with_donors)) continue;
    if (best < entries_.size() && key.size() <= entries_[best].tokens.size()) continue;
    if (std::equal(key.begin(), key.end(), context.begin())) best = i;
  }
  return best;
}

ParkedSlots::Match ParkedSlots::Find(std::span<const int32_t> context) const {
  const size_t best = Best(context, true);
  if (best == entries_.size()) return {};
  return {static_cast<int64_t>(entries_[best].tokens.size()), entries_[best].shared};
}

int64_t ParkedSlots::Take(std::span<const int32_t> context, SequenceState* state,
                          const Copier& copy, Status* copy_error) {
  lookup_tokens_ += context.size();
  const size_t best = Best(context, copy != nullptr);
  if (best == entries_.size()) return 0;
  const int64_t length = static_cast<int64_t>(entries_[best].tokens.size());
  if (entries_[best].shared) {
    Result<SequenceState> copied = copy(entries_[best].state);
    if (!copied.ok()) {
      if (copy_error != nullptr) *copy_error = copied.status();
      return 0;
    }
    *state = std::move(copied).value();
    // The donor becomes the most recently used: DropOldest reaches it last.
    std::rotate(entries_.begin() + static_cast<std::ptrdiff_t>(best),
                entries_.begin() + static_cast<std::ptrdiff_t>(best) + 1, entries_.end());
  } else {
    return MoveOut(best, state);
  }
  hit_tokens_ += static_cast<uint64_t>(length);
  return length;
}

int64_t ParkedSlots::TakeDonor(std::span<const int32_t> context, SequenceState* state) {
  lookup_tokens_ += context.size();
  const size_t best = Best(context, true);
  if (best == entries_.size() || !entries_[best].shared) return 0;
  return MoveOut(best, state);
}

int64_t ParkedSlots::MoveOut(size_t index, SequenceState* state) {
  const int64_t length = static_cast<int64_t>(entries_[index].tokens.size());
  *state = std::move(entries_[index].state);
  entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(index));
  hit_tokens_ += static_cast<uint64_t>(length);
  return length;
}

bool ParkedSlots::DropOldest(const std::function<bool(std::span<const int32_t>)>& wanted,
                             const Protect& protect) {
  // The oldest unprotected entry nobody wants, else the oldest unprotected one.
  size_t victim = entries_.size(), fallback = entries_.size();
  for (size_t i = 0; i < entries_.size() && victim == entries_.size(); ++i) {
    if (protect && protect(entries_[i].tokens, entries_[i].shared)) continue;
    if (fallback == entries_.size()) fallback = i;
    if (!wanted || !wanted(entries_[i].tokens)) victim = i;
  }
  if (victim == entries_.size()) victim = fallback;
  if (victim == entries_.size()) return false;
  // Its SequenceState's lease gives the slot back.
  entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(victim));
  return true;
}

}  // namespace deepinfer
