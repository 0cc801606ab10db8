#include "engine/cache/parked_slots.h"

#include <algorithm>

namespace deepinfer {

void ParkedSlots::Park(std::vector<int32_t> tokens, SequenceState state) {
  if (capacity_ == 0 || tokens.empty() || state.slot.slot() < 0) return;
  if (entries_.size() == capacity_) DropOldest();
  entries_.push_back({std::move(tokens), std::move(state)});
}

int64_t ParkedSlots::Take(std::span<const int32_t> context, SequenceState* state) {
  lookup_tokens_ += context.size();
  size_t best = entries_.size();
  for (size_t i = 0; i < entries_.size(); ++i) {
    const std::vector<int32_t>& key = entries_[i].tokens;
    if (key.size() >= context.size()) continue;
    if (best < entries_.size() && key.size() <= entries_[best].tokens.size()) continue;
    if (std::equal(key.begin(), key.end(), context.begin())) best = i;
  }
  if (best == entries_.size()) return 0;
  const int64_t length = static_cast<int64_t>(entries_[best].tokens.size());
  *state = std::move(entries_[best].state);
  entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(best));
  hit_tokens_ += static_cast<uint64_t>(length);
  return length;
}

bool ParkedSlots::DropOldest(const std::function<bool(std::span<const int32_t>)>& wanted) {
  if (entries_.empty()) return false;
  size_t victim = 0;
  if (wanted) {
    while (victim < entries_.size() && wanted(entries_[victim].tokens)) ++victim;
    if (victim == entries_.size()) victim = 0;  // all wanted: the oldest after all
  }
  // Its SequenceState's lease gives the slot back.
  entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(victim));
  return true;
}

}  // namespace deepinfer
