// Byte-level BPE merging on token ids: a piece starts as one id per byte and the adjacent pair
// with the lowest merge rank is merged until none is left (leftmost first among equal pairs).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace deepinfer {

class BpeMerger {
 public:
  /// `byte_ids[b]` is the token of the single byte b; merges are (left, right, merged) in rank
  /// order.
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
  // Open addressing with linear probing: the pair table is read for every adjacent pair of
  // every piece, so it is a flat power-of-two array rather than a node-based map.
  Entry Lookup(int32_t left, int32_t right) const {
    const uint64_t key = Key(left, right);
    for (uint64_t i = Hash(key) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == key) return s.entry;
      if (s.key == kEmpty) return {-1, -1};
    }
  }
  static uint64_t Hash(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return k;
  }
  static uint64_t Key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  void EncodeShort(std::string_view piece, std::vector<int32_t>* out) const;
  void EncodeLong(std::string_view piece, std::vector<int32_t>* out) const;

  struct Slot {
    uint64_t key;
    Entry entry;
  };
  static constexpr uint64_t kEmpty = ~0ull;
  int32_t byte_ids_[256];
  std::vector<Slot> slots_;
  uint64_t mask_ = 0;
};

}  // namespace deepinfer
