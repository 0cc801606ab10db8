#include "grammar/mask_cache.h"

namespace deepinfer::grammar {

bool MaskCache::Bind(const TokenVocabulary* vocab) {
  std::lock_guard<std::mutex> lock(mu_);
  if (vocab_ == nullptr) vocab_ = vocab;
  return vocab_ == vocab;
}

uint64_t MaskCache::HashKey(const std::vector<uint64_t>& key) {
  uint64_t h = 0x9e3779b97f4a7c15ULL ^ key.size();
  for (uint64_t k : key) {
    h ^= k + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdULL;
  }
  return h ^ (h >> 31);
}

std::shared_ptr<const MaskCache::Entry> MaskCache::Find(uint64_t hash,
                                                        const std::vector<uint64_t>& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [begin, end] = slots_.equal_range(hash);
  for (auto it = begin; it != end; ++it) {
    if (it->second.entry->key == key) {
      it->second.last_use = ++clock_;
      ++hits_;
      return it->second.entry;
    }
  }
  ++misses_;
  return nullptr;
}

void MaskCache::Insert(uint64_t hash, std::shared_ptr<const Entry> entry) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [begin, end] = slots_.equal_range(hash);
  for (auto it = begin; it != end; ++it) {
    if (it->second.entry->key == entry->key) return;  // another matcher got there first
  }
  bytes_ += entry->bytes();
  slots_.emplace(hash, Slot{std::move(entry), ++clock_});
  EvictLocked();
}

void MaskCache::EvictLocked() {
  // A linear scan per eviction: entries are few (each holds a vocabulary-sized mask) and an
  // eviction follows a miss, which walked the trie and dwarfs the scan.
  while (bytes_ > max_bytes_ && slots_.size() > 1) {
    auto oldest = slots_.begin();
    for (auto it = slots_.begin(); it != slots_.end(); ++it) {
      if (it->second.last_use < oldest->second.last_use) oldest = it;
    }
    bytes_ -= oldest->second.entry->bytes();
    slots_.erase(oldest);
  }
}

MaskCache::Stats MaskCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return Stats{hits_, misses_, slots_.size(), bytes_};
}

}  // namespace deepinfer::grammar
