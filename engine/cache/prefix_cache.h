// Prefix cache: snapshots of a sequence's whole decoding state (window rings, compressed rows,
// indexer keys, compressor partial windows) at 128-token block boundaries, keyed by the tokens
// before them. A request whose prompt starts with a cached prefix resumes from the snapshot and
// prefills only the rest — exactly, because a snapshot is the complete state at that position
// (reference/deepseek-v4.md §4.4's exact option; no tail replay). LRU within a byte budget.
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/model/sequence_state.h"

namespace deepinfer {

class PrefixCache {
 public:
  static constexpr int64_t kBlock = 128;
  explicit PrefixCache(uint64_t budget_bytes) : budget_(budget_bytes) {}

  /// The longest cached block-aligned prefix of `tokens` shorter than all of them (one token
  /// must stay to produce logits): copies its state into *state and returns its length (0: none).
  int64_t Lookup(std::span<const int32_t> tokens, SequenceState* state);
  /// Offers the state reached after exactly `tokens` (a multiple of kBlock long).
  void Insert(std::span<const int32_t> tokens, const SequenceState& state);

  uint64_t bytes() const { return bytes_; }
  uint64_t hit_tokens() const { return hit_tokens_; }
  uint64_t lookup_tokens() const { return lookup_tokens_; }
  size_t entries() const { return map_.size(); }

 private:
  struct Entry {
    std::vector<int32_t> tokens;
    SequenceState state;
    uint64_t bytes;
    std::list<uint64_t>::iterator lru;
  };
  static uint64_t Extend(uint64_t h, std::span<const int32_t> block);

  uint64_t budget_;
  uint64_t bytes_ = 0, hit_tokens_ = 0, lookup_tokens_ = 0;
  std::unordered_map<uint64_t, Entry> map_;  // by the hash of the prefix
  std::list<uint64_t> lru_;                  // most recently used first
};

}  // namespace deepinfer
