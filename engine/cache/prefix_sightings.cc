#include "engine/cache/prefix_sightings.h"

namespace deepinfer {

template <class Fn>
void PrefixSightings::ForEachPrefix(std::span<const int32_t> context, Fn&& fn) {
  // FNV-1a over the tokens' bytes, read off at each boundary: one pass for every prefix.
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < context.size(); ++i) {
    const auto t = static_cast<uint32_t>(context[i]);
    for (int b = 0; b < 4; ++b) {
      h ^= (t >> (8 * b)) & 0xffu;
      h *= 1099511628211ull;
    }
    const size_t length = i + 1;
    if (length % kBlock == 0 && length < context.size()) fn(static_cast<int64_t>(length), h);
  }
}

int64_t PrefixSightings::DeepestSeen(std::span<const int32_t> context) const {
  int64_t deepest = 0;
  ForEachPrefix(context, [&](int64_t length, uint64_t h) {
    if (seen_.count(h) != 0) deepest = length;
  });
  return deepest;
}

void PrefixSightings::Record(std::span<const int32_t> context) {
  if (capacity_ == 0) return;
  ForEachPrefix(context, [&](int64_t, uint64_t h) {
    if (!seen_.insert(h).second) return;
    order_.push_back(h);
    if (order_.size() > capacity_) {
      seen_.erase(order_.front());
      order_.pop_front();
    }
  });
}

}  // namespace deepinfer
