// Prefix sightings: which block-aligned prompt prefixes the engine has seen before. On the slot
// path a shared prefix can only be reused from a copy of a slot taken while a sequence passes
// exactly that boundary (its window ring and compressor windows move on after it), and a copy
// costs a whole slot. So the engine copies a prefix on its second sighting, not its first: the
// first request with a system prompt records the hashes of its prompt's 128-token prefixes, the
// second finds the deepest one recorded before and leaves a copy there as it prefills, and every
// later request starts from that copy. Hashes only: a collision costs one useless copy, never a
// wrong result, since a copy is taken over only under its exact tokens (engine/cache/
// parked_slots.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <unordered_set>

namespace deepinfer {

/// Hashes of block-aligned prefixes seen, the oldest forgotten beyond `capacity` (the file
/// comment). Not thread-safe: the engine thread owns it.
class PrefixSightings {
 public:
  static constexpr int64_t kBlock = 128;

  explicit PrefixSightings(size_t capacity) : capacity_(capacity) {}

  /// The longest block-aligned strict prefix of `context` (at least one token after it, which
  /// produces logits) recorded before, in tokens; 0 when none.
  int64_t DeepestSeen(std::span<const int32_t> context) const;
  /// Records every block-aligned strict prefix of `context`.
  void Record(std::span<const int32_t> context);

  size_t size() const { return order_.size(); }

 private:
  // Calls fn(length, hash) for each block-aligned strict prefix of context, shortest first.
  template <class Fn>
  static void ForEachPrefix(std::span<const int32_t> context, Fn&& fn);

  size_t capacity_;
  std::unordered_set<uint64_t> seen_;
  std::deque<uint64_t> order_;  // recorded oldest first, for forgetting
};

}  // namespace deepinfer
