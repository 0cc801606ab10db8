// Byte-level BPE merging on token ids: a piece starts as one id per byte and the adjacent pair
// with the lowest merge rank is merged until none is left (leftmost first among equal pairs).
#pragma once

#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace deepinfer {

class BpeMerger {
 public:
  /// `byte_ids[b]` is the token of the single byte b; merges are (left, right, merged) in rank order.
  struct Merge {
    int32_t left, right, merged;
  };
  BpeMerger(const int32_t (&byte_ids)[256], const std::vector<Merge>& merges);

  /// Appends the ids of `piece` (raw bytes) to `out`.
  void Encode(std::string_view piece, std::vector<int32_t>* out) const;

 private:
  // (rank, merged id) of a pair, or rank -1.
  struct Entry {
    int32_t rank, merged;
  };
  Entry Lookup(int32_t left, int32_t right) const {
    auto it = pairs_.find(Key(left, right));
    return it == pairs_.end() ? Entry{-1, -1} : it->second;
  }
  static uint64_t Key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  void EncodeShort(std::string_view piece, std::vector<int32_t>* out) const;
  void EncodeLong(std::string_view piece, std::vector<int32_t>* out) const;

  int32_t byte_ids_[256];
  std::unordered_map<uint64_t, Entry> pairs_;
};

}  // namespace deepinfer
