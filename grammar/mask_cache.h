// MaskCache: the context-independent part of token masks, per matcher state, shared by every
// matcher of one compiled grammar (and so by every request using that grammar).
//
// A matcher's state is its whole Earley chart, but most of a mask depends only on the top set:
// walking the vocabulary trie from the top set consults older sets only when an item that began
// before the top set completes. Items are keyed with their origin reduced to "here", "the initial
// set" (the same for every matcher of the grammar) or "earlier", so one key stands for the same
// state wherever it occurs, e.g. "inside a string value" anywhere in a document. For a key the
// cache holds the tokens every context with that key allows and the trie nodes (a skeleton of
// paths) below which the walk consulted earlier sets; a mask is the cached tokens plus a walk of
// the real chart from those nodes only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace deepinfer::grammar {

class TokenVocabulary;

class MaskCache {
 public:
  /// One step of the skeleton, in preorder: push `byte` (reaching trie node `trie_node`); steps
  /// up to `end` (exclusive) are its subtree. A frontier step has no subtree: below it the walk
  /// needs the real chart.
  struct Step {
    int32_t trie_node;
    uint32_t end;
    uint8_t byte;
    bool frontier;
  };
  struct Entry {
    std::vector<uint64_t> key;
    std::vector<uint32_t> words;  // tokens allowed in every context with this key
    std::vector<Step> skeleton;
    size_t bytes() const {
      return sizeof(Entry) + key.size() * 8 + words.size() * 4 + skeleton.size() * sizeof(Step);
    }
  };
  struct Stats {
    uint64_t hits = 0;
    uint64_t misses = 0;
    size_t entries = 0;
    size_t bytes = 0;
  };

  /// Entries beyond `max_bytes` are evicted, least recently used first. All caches of the
  /// process together stay within kProcessBytes: past it a cache evicts its own entries, and
  /// when it has none left to give the new entry is not kept.
  static constexpr size_t kProcessBytes = size_t{256} << 20;
  explicit MaskCache(size_t max_bytes = size_t{16} << 20) : max_bytes_(max_bytes) {}
  ~MaskCache();
  MaskCache(const MaskCache&) = delete;
  MaskCache& operator=(const MaskCache&) = delete;
  /// Bytes held by all caches of the process.
  static size_t process_bytes();

  /// Masks are over one vocabulary: the first caller binds it; other vocabularies get false.
  bool Bind(const TokenVocabulary* vocab);
  /// The entry for `key` (hash = HashKey(key)), or null; counts a hit or a miss.
  std::shared_ptr<const Entry> Find(uint64_t hash, const std::vector<uint64_t>& key);
  void Insert(uint64_t hash, std::shared_ptr<const Entry> entry);
  Stats stats() const;

  static uint64_t HashKey(const std::vector<uint64_t>& key);

 private:
  struct Slot {
    std::shared_ptr<const Entry> entry;
    uint64_t last_use;
  };
  void EvictLocked();
  void EvictOldestLocked();

  mutable std::mutex mu_;
  const TokenVocabulary* vocab_ = nullptr;
  std::unordered_multimap<uint64_t, Slot> slots_;
  size_t max_bytes_;
  size_t bytes_ = 0;
  uint64_t clock_ = 0;
  uint64_t hits_ = 0;
  uint64_t misses_ = 0;
};

}  // namespace deepinfer::grammar
