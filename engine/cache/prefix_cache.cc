#include "engine/cache/prefix_cache.h"

#include <algorithm>

namespace deepinfer {

uint64_t PrefixCache::Extend(uint64_t h, std::span<const int32_t> block) {
  for (int32_t t : block) {
    h ^= static_cast<uint32_t>(t);
    h *= 0x100000001B3ull;
    h ^= h >> 29;
  }
  return h;
}

int64_t PrefixCache::Lookup(std::span<const int32_t> tokens, SequenceState* state) {
  lookup_tokens_ += tokens.size();
  if (budget_ == 0) return 0;
  int64_t best = 0;
  uint64_t best_key = 0;
  uint64_t h = 0xcbf29ce484222325ull;
  for (int64_t end = kBlock; end < static_cast<int64_t>(tokens.size()); end += kBlock) {
    h = Extend(h, tokens.subspan(end - kBlock, kBlock));
    auto it = map_.find(h);
    if (it == map_.end()) continue;  // a shorter prefix may be missing while a longer is cached
    const Entry& e = it->second;
    if (e.tokens.size() == static_cast<size_t>(end) &&
        std::equal(e.tokens.begin(), e.tokens.end(), tokens.begin())) {
      best = end;
      best_key = h;
    }
  }
  if (best == 0) return 0;
  Entry& e = map_.at(best_key);
  lru_.splice(lru_.begin(), lru_, e.lru);
  *state = e.state;
  hit_tokens_ += best;
  return best;
}

void PrefixCache::Insert(std::span<const int32_t> tokens, const SequenceState& state) {
  if (budget_ == 0 || tokens.empty() || tokens.size() % kBlock != 0) return;
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t end = kBlock; end <= tokens.size(); end += kBlock)
    h = Extend(h, tokens.subspan(end - kBlock, kBlock));
  if (auto it = map_.find(h); it != map_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    return;
  }
  const uint64_t size = state.bytes() + tokens.size() * sizeof(int32_t);
  if (size > budget_) return;
  while (bytes_ + size > budget_ && !lru_.empty()) {
    auto victim = map_.find(lru_.back());
    bytes_ -= victim->second.bytes;
    map_.erase(victim);
    lru_.pop_back();
  }
  lru_.push_front(h);
  map_.emplace(
      h, Entry{std::vector<int32_t>(tokens.begin(), tokens.end()), state, size, lru_.begin()});
  bytes_ += size;
}

}  // namespace deepinfer
